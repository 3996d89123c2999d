import type { LoggerService } from '@nestjs/common';

/** An application logger that keeps what Nest logs at error level (and drops the rest), for "was it logged?" checks. */
export class ErrorLog implements LoggerService {
  readonly errors: unknown[] = [];
  error(message: unknown): void {
    this.errors.push(message);
  }
  log(): void {}
  warn(): void {}
  debug(): void {}
  verbose(): void {}
}
