/**
 * Resolves the same key templates as @Locked (`<0>`, `<1.userId>`) for the in-process mode, so both
 * modes lock exactly the same keys.
 */
export function resolveKeyTemplate(template: string, args: readonly unknown[]): string {
  return template.replace(/<(\d+)((?:\.[^.<>]+)*)>/g, (_match, index: string, path: string) => {
    let value: unknown = args[Number(index)];
    for (const segment of path.split('.').filter(Boolean)) value = (value as Record<string, unknown> | undefined)?.[segment];
    if (value === undefined || value === null || value === '' || typeof value === 'object' || typeof value === 'function') {
      throw new Error(`Lock key template "${template}": <${index}${path}> is ${value === '' ? 'empty' : String(value)}.`);
    }
    return String(value);
  });
}
