/**
 * The options a box archive carries are not trusted (SECURITY.md "Images and box archives"): an archive
 * may come from anyone, so what would widen the box's reach on this host is dropped unless the importing
 * caller passes it again (`importBox(path, { options })`): added capabilities, `allowNet` entries (the box
 * gets the default network policy), host and managed volumes, port publications, secrets and
 * `advanced.allowUnlimited`. What stays (cpus, memory, disk size, env, working directory, user, command,
 * health check, lifetimes, isolation, network mode) cannot reach beyond the box. The import answers with
 * the list of what was dropped.
 */
import type { JsBoxOptions } from '../types.ts';
import type { JsBox } from './box.ts';

/** Options of `importBox(path, options)`. */
export interface ImportOptions {
  /** Name of the new box. */
  name?: string;
  /**
   * Options applied over the archive's (each field given replaces the archive's): the only way an imported
   * box gets capabilities, `allowNet` entries, volumes, ports or secrets.
   */
  options?: JsBoxOptions;
}

/** The box an import started, with the archive options that were dropped (paths such as `volumes[0]`). */
export type ImportedBox = JsBox & { readonly droppedOptions: readonly string[] };

/**
 * `importBox`'s second argument (a name, or `ImportOptions`) as `ImportOptions`.
 */
export function importOptionsOf(nameOrOptions: string | ImportOptions | undefined): ImportOptions {
  if (nameOrOptions === undefined || typeof nameOrOptions === 'string') {
    return nameOrOptions === undefined ? {} : { name: nameOrOptions };
  }
  return nameOrOptions;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * The archive's options without what it may not bring (see the module comment), then `given` applied
 * over them field by field.
 * @returns the options to create the box with and the dropped option paths, in order.
 */
export function untrustedOptions(
  archived: Record<string, unknown>,
  given: JsBoxOptions = {},
): { options: JsBoxOptions; dropped: string[] } {
  const dropped: string[] = [];
  const out: Record<string, unknown> = { ...archived };
  for (const key of ['ports', 'secrets'] as const) {
    if (out[key] !== undefined) {
      if (!Array.isArray(out[key]) || out[key].length > 0) dropped.push(key);
      delete out[key];
    }
  }
  if (Array.isArray(out.volumes)) {
    out.volumes.forEach((_, i) => {
      dropped.push(`volumes[${i}]`);
    });
    delete out.volumes;
  } else if (out.volumes !== undefined) {
    dropped.push('volumes');
    delete out.volumes;
  }
  if (isObject(out.network)) {
    const { allowNet, ...network } = out.network;
    if (Array.isArray(allowNet) && allowNet.length > 0) dropped.push('network.allowNet');
    out.network = network;
  } else if (out.network !== undefined) {
    dropped.push('network');
    delete out.network;
  }
  if (isObject(out.advanced)) {
    const advanced: Record<string, unknown> = { ...out.advanced };
    if (advanced.allowUnlimited !== undefined) {
      if (advanced.allowUnlimited !== false) dropped.push('advanced.allowUnlimited');
      delete advanced.allowUnlimited;
    }
    if (isObject(advanced.capabilities)) {
      const { add, ...caps } = advanced.capabilities;
      if (Array.isArray(add) && add.length > 0) dropped.push('advanced.capabilities.add');
      advanced.capabilities = caps;
    }
    out.advanced = advanced;
  } else if (out.advanced !== undefined) {
    dropped.push('advanced');
    delete out.advanced;
  }
  const options = { ...out, ...given } as JsBoxOptions;
  // A field the caller passes again is not listed as dropped.
  const passed = (path: string) => {
    if (path.startsWith('volumes')) return given.volumes !== undefined;
    if (path.startsWith('network')) return given.network !== undefined;
    if (path === 'advanced.capabilities.add' || path === 'advanced.allowUnlimited')
      return given.advanced !== undefined;
    return given[path as keyof JsBoxOptions] !== undefined;
  };
  return { options, dropped: dropped.filter((p) => !passed(p)) };
}
