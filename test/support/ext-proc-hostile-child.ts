/** The hostile ext_proc client's process: `runHostile` with the run in argv[2], answers as JSON on stdout. */
import { type HostileRun, runHostile } from './ext-proc-hostile.js';

const answers = await runHostile(JSON.parse(process.argv[2] as string) as HostileRun);
process.stdout.write(JSON.stringify(answers));
