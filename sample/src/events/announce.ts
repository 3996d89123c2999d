/**
 * Machine-readable lifecycle events, one JSON object per stdout line, next to Nest's human logs.
 * The demo (the parent process) waits on them: "listening on port N", "inside a claim, freeze me now".
 */
export function announce(event: string, data: Record<string, unknown> = {}): void {
  process.stdout.write(JSON.stringify({ event, pid: process.pid, at: Date.now(), ...data }) + '\n');
}
