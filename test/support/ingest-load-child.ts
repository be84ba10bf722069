/** The load generator's process: `ingestLoad` with the options in argv[2], figures as JSON on stdout. */
import { type IngestLoadOptions, ingestLoad } from './ingest-load.js';

const figures = await ingestLoad(JSON.parse(process.argv[2] as string) as IngestLoadOptions);
process.stdout.write(JSON.stringify({ ...figures, acknowledged: [...figures.acknowledged] }));
