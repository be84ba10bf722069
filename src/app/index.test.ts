import { describe, expect, it } from 'vitest';
import { loadConfig } from '../config/index.js';
import { createJudgeHttpClient } from './index.js';

describe('the judge HTTP client', () => {
  const config = loadConfig({
    env: {},
    overrides: {
      judges: { local: { endpoint: 'http://127.0.0.1:9/v1', model: 'm' } },
    },
  });

  it('lets the configured judge host through and refuses other internal targets', async () => {
    const http = createJudgeHttpClient(config);
    try {
      // Port 9 (discard) is closed: the request gets past the guard and fails to connect.
      await expect(
        http.request({ method: 'GET', url: 'http://127.0.0.1:9/v1/models' }),
      ).rejects.toMatchObject({
        code: expect.not.stringMatching(/REFUSED/),
      });
      for (const url of [
        'http://10.0.0.1/v1',
        'http://169.254.169.254/latest',
        'http://localhost:9/v1',
      ]) {
        await expect(http.request({ method: 'GET', url })).rejects.toMatchObject({
          code: 'OUTBOUND_TARGET_REFUSED',
        });
      }
    } finally {
      await http.close();
    }
  });
});
