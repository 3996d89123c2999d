import { LockOptionsError } from '../errors/lock-options.error';

/**
 * Refuses a standard (TC39) decorator call, `(method, context)`, which TypeScript emits when
 * `experimentalDecorators` is off. Supporting it would not make `@Locked` usable: NestJS's own decorators
 * (`@Injectable`, `@Inject`, parameter decorators) and its constructor injection need `experimentalDecorators`
 * and `emitDecoratorMetadata`, which standard decorators have no equivalent of; without them, key templates could
 * not be checked against the parameters nor Observable results recognised either. So the answer is the setting.
 */
export function rejectStandardDecoratorCall(context: unknown, descriptor: unknown): void {
  if (descriptor !== undefined || typeof context !== 'object' || context === null || !('kind' in context)) return;
  const { kind, name } = context as { kind: unknown; name?: unknown };
  const what = kind === 'method' ? `method ${String(name)}` : `${String(kind)} ${String(name)}`;
  throw new LockOptionsError(
    'experimentalDecorators',
    `@Locked on ${what} was applied as a standard (TC39) decorator. ` +
      `Set "experimentalDecorators": true and "emitDecoratorMetadata": true in tsconfig.json, as NestJS requires.`,
  );
}
