/** The OpenTelemetry API as this library uses it: a type-only import, erased from the emitted JavaScript. */
export type OpenTelemetryApi = typeof import('@opentelemetry/api');

let loaded: OpenTelemetryApi | null | undefined;

/**
 * `@opentelemetry/api`, or `undefined` when it is not installed (it is an optional peer dependency).
 * Required at most once per process, on the first LockService, never when the library is imported,
 * so an application without it pays nothing and nothing throws.
 */
export function loadOpenTelemetryApi(): OpenTelemetryApi | undefined {
  if (loaded === undefined) {
    try {
      // eslint-disable-next-line @typescript-eslint/no-require-imports -- optional peer: a static import would make it mandatory
      loaded = require('@opentelemetry/api') as OpenTelemetryApi;
    } catch {
      loaded = null;
    }
  }
  return loaded ?? undefined;
}
