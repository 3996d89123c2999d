let silenced = false;

/** After Ctrl-C: the requests failing while everything stops are not progress. */
export function silenceProgressBars(): void {
  silenced = true;
}

/** A one-line progress bar on a terminal; a few milestone lines when stdout is a pipe or file. */
export class ProgressBar {
  private done = 0;
  private lastDraw = 0;
  private lastMilestone = -1;
  private readonly tty = Boolean(process.stdout.isTTY);

  constructor(
    private readonly label: string,
    private readonly total: number,
    private readonly width = 30,
  ) {}

  tick(): void {
    this.done++;
    if (silenced) return;
    const now = Date.now();
    if (this.tty) {
      if (this.done === this.total || now - this.lastDraw >= 50) this.draw();
    } else {
      const milestone = Math.floor((this.done / this.total) * 4);
      if (milestone > this.lastMilestone) {
        this.lastMilestone = milestone;
        process.stdout.write(`${this.line()}\n`);
      }
    }
  }

  finish(note = ''): void {
    if (silenced) return;
    if (this.tty) process.stdout.write(`\r${this.line()}${note ? `  ${note}` : ''}\x1b[K\n`);
    else if (note) process.stdout.write(`  ${this.label} ${note}\n`);
  }

  private draw(): void {
    this.lastDraw = Date.now();
    process.stdout.write(`\r${this.line()}\x1b[K`);
  }

  private line(): string {
    const filled = Math.round((this.done / this.total) * this.width);
    return `  ${this.label} [${'#'.repeat(filled)}${'.'.repeat(this.width - filled)}] ${this.done}/${this.total}`;
  }
}
