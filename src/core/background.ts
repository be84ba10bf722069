/**
 * A background loop: runs `pass` every `intervalMs` and whenever woken, one pass at a time (a wake
 * during a pass runs one more right after it). Nothing runs before `start()` — tests drive the
 * pass themselves — and `stop()` waits for a pass in progress; both are safe to call twice.
 */
export class BackgroundLoop {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private again = false;
  private done = false;

  constructor(
    private readonly pass: () => Promise<unknown>,
    private readonly intervalMs: number,
    private readonly onError: (err: unknown) => void,
  ) {}

  /** True once `stop()` was called: a pass in progress should end early. */
  get stopped(): boolean {
    return this.done;
  }

  start(): void {
    if (this.done || this.timer !== undefined) return;
    this.timer = setInterval(() => this.wake(), this.intervalMs);
    this.timer.unref();
    this.wake();
  }

  wake(): void {
    if (this.done || this.timer === undefined) return;
    if (this.running !== undefined) {
      this.again = true;
      return;
    }
    this.running = this.pass()
      .then(() => undefined)
      .catch(this.onError)
      .finally(() => {
        this.running = undefined;
        if (this.again) {
          this.again = false;
          this.wake();
        }
      });
  }

  async stop(): Promise<void> {
    this.done = true;
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
  }
}
