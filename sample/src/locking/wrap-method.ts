/**
 * Replaces a method with a wrapper that keeps `this` and every metadata key the other decorators
 * (@Cron, @Get, ...) put on the original, whichever order the decorators are written in.
 */
export function wrapMethod(
  descriptor: PropertyDescriptor,
  wrap: (original: (...args: unknown[]) => Promise<unknown>) => (this: unknown, ...args: unknown[]) => Promise<unknown>,
): PropertyDescriptor {
  const original = descriptor.value as (...args: unknown[]) => Promise<unknown>;
  const wrapper = wrap(original);
  for (const key of Reflect.getMetadataKeys(original)) {
    Reflect.defineMetadata(key, Reflect.getMetadata(key, original), wrapper);
  }
  Object.defineProperty(wrapper, 'name', { value: original.name });
  descriptor.value = wrapper;
  return descriptor;
}
