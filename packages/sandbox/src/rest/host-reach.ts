/**
 * What a REST client may not ask of a box, in one place for every route that takes box options from a
 * client (`POST /v1/boxes`, `POST /v1/boxes/{box}/clone`, `POST /v1/boxes/import`) and for the REST client
 * that refuses them before a request leaves: host paths never come from a client (spec 002 rejection 4:
 * `rootfsPath` and host bind mounts), and port publication is local-runtime only. Managed volumes are
 * not refused here: the server resolves them among the caller's tenant's volumes (`tenancy/volumes.ts`).
 */
import { isObject, reject } from '../runtime/options-fields.ts';

/**
 * Refuses the options that would reach the host: `rootfsPath`, any `volumes[i].hostPath` and a non-empty
 * `ports`. Other fields are left to the option rules (`validateBoxOptions`).
 * @param options box options as a client sent them (camelCase), possibly only some fields.
 * @throws BoxError `invalid_option` naming the field (`rootfsPath`, `volumes[i].hostPath`, `ports`).
 */
export function refuseHostReach(options: Record<string, unknown>): void {
  if (options.rootfsPath !== undefined && options.rootfsPath !== null) {
    reject('rootfsPath', 'a host rootfs path is refused by a REST runtime');
  }
  if (Array.isArray(options.volumes)) {
    options.volumes.forEach((volume: unknown, i) => {
      if (isObject(volume) && volume.hostPath !== undefined) {
        reject(`volumes[${i}].hostPath`, 'host bind mounts are refused by a REST runtime');
      }
    });
  }
  if (Array.isArray(options.ports) && options.ports.length > 0) {
    reject('ports', 'port publication is refused by a REST runtime (local runtime only)');
  }
}
