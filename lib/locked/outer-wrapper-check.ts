import { LockedDecoratorOrderError } from '../errors/locked-decorator-order.error';
import { LOCKED_METADATA } from './locked.constants';

interface LockedSlot {
  readonly wrapper: object;
  readonly allowOuterWrapper: boolean;
}

/** Per class prototype: the wrapper `@Locked` installed for each method, to see at startup whether something replaced it. */
const LOCKED_SLOTS = new WeakMap<object, Map<string | symbol, LockedSlot>>();

export function recordLockedWrapper(prototype: object, propertyKey: string | symbol, wrapper: object, allowOuterWrapper: boolean): void {
  let slots = LOCKED_SLOTS.get(prototype);
  if (!slots) LOCKED_SLOTS.set(prototype, (slots = new Map<string | symbol, LockedSlot>()));
  slots.set(propertyKey, { wrapper, allowOuterWrapper });
}

/**
 * Throws `LockedDecoratorOrderError` when a decorator applied after `@Locked` (written above it) replaced the
 * locked method. Decorators only add metadata in the common case (`@Get`, `@Cron`, `@OnEvent`) and leave our
 * wrapper in place; `@Transactional()` from @nestjs-cls/transactional (no marker of its own) and other wrapping
 * decorators replace it with a function that carries @Locked's metadata, which is how they are recognised.
 * Checked when the module initialises, i.e. at boot, for the instances Nest created then.
 */
export function assertLockedOutermost(instance: object): void {
  for (
    let proto: object | null = Object.getPrototypeOf(instance) as object | null;
    proto && proto !== Object.prototype;
    proto = Object.getPrototypeOf(proto) as object | null
  ) {
    const slots = LOCKED_SLOTS.get(proto);
    if (!slots) continue;
    for (const [key, slot] of slots) {
      const current: unknown = Object.getOwnPropertyDescriptor(proto, key)?.value;
      // A wrapping decorator carries the metadata over (as nestjs-cls does), so @Get/@Cron below it keep working;
      // a test spy put on the prototype does not, and is not a decorator order to complain about.
      if (current !== slot.wrapper && !slot.allowOuterWrapper && typeof current === 'function' && Reflect.hasMetadata(LOCKED_METADATA, current)) {
        throw new LockedDecoratorOrderError((proto.constructor as { name?: string } | undefined)?.name ?? '(anonymous class)', String(key));
      }
    }
  }
}
