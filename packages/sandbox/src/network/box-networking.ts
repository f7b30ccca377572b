/**
 * What the root (`manager.ts`) and the rootless (`rootless.ts`) networking of local boxes share: the
 * per-box bookkeeping between `prepare` and `setup` (ports, secrets, detach), the publications made
 * when a box started, the per-box state files under one short state directory, and host port
 * publication through slirp4netns's API socket (spec 002 `JsPortSpec`, `JsPublishedPort`).
 */
import { mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import type { EngineNetworkContext } from '../engine/engine.ts';
import { BoxError } from '../errors.ts';
import type { JsPublishedPort } from '../types.ts';
import { addHostForward } from './netns.ts';

/** A port publication request (defaults applied: `protocol` tcp, `hostIp` 0.0.0.0). */
export interface PortRequest {
  /** Host port to listen on (1–65535); absent: the kernel picks a free one. */
  hostPort?: number;
  guestPort: number;
  protocol: 'tcp';
  hostIp: string;
}

/** A secret rule with its value (kept in memory only). */
export interface SecretRule {
  name: string;
  value: string;
  hosts: string[];
  placeholder: string;
}

/** What `prepare` records for a box before the engine starts it. */
export interface BoxNetworkConfig {
  ports: PortRequest[];
  secrets: SecretRule[];
  /** Detached boxes keep slirp4netns (and their published ports) after this process exits. */
  detach: boolean;
  /**
   * The box's network, given when its host side (resolver, secrets proxy, gateway namespace,
   * slirp4netns, ruleset) may be set up at once by `prepare`, while the engine mounts and starts the
   * box; the box is then linked to its gateway by `setup` (container tier, once its init runs) or by
   * `prepareNetns` (gVisor tier, before runsc starts).
   */
  network?: EngineNetworkContext['network'];
}

/** A free TCP port on `host` (the kernel's choice), for auto-assigned publications. */
function freePort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, host, () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/**
 * The per-box bookkeeping both networkings extend; state files are `<stateDir>/<id>.<ext>` (the
 * directory path must be short: slirp4netns's API socket path must fit 107 bytes).
 */
export abstract class SlirpNetworking {
  readonly #stateDir: string;
  readonly #prepared = new Map<string, BoxNetworkConfig>();
  readonly #published = new Map<string, JsPublishedPort[]>();

  /** Creates `stateDir` (mode 0700) when missing. */
  constructor(options: { stateDir: string }) {
    this.#stateDir = options.stateDir;
    mkdirSync(this.#stateDir, { recursive: true, mode: 0o700 });
  }

  /** Records ports, secrets and detach for the next start of box `id`. */
  prepare(id: string, config: BoxNetworkConfig): void {
    this.#prepared.set(id, config);
  }

  /** What `prepare` recorded for box `id` (left in place for `setup`), or the defaults of `takeConfig`. */
  protected peekConfig(id: string): BoxNetworkConfig {
    return this.#prepared.get(id) ?? { ports: [], secrets: [], detach: true };
  }

  /** Publications made when this process started box `id` (concrete host ports), or null. */
  publishedPorts(id: string): JsPublishedPort[] | null {
    const published = this.#published.get(id);
    return published ? published.map((p) => ({ ...p })) : null;
  }

  /** Path of box `id`'s state file with extension `ext` (`json`, `pid`, `sock`, `log`). */
  protected file(id: string, ext: string): string {
    return join(this.#stateDir, `${id}.${ext}`);
  }

  /**
   * The start of every `setup`: takes what `prepare` recorded for the box (a detached box without
   * ports or secrets when nothing was), and for a `disabled` network records no publications and
   * returns null (nothing else to do).
   */
  protected takeConfig(ctx: EngineNetworkContext): BoxNetworkConfig | null {
    const config = this.peekConfig(ctx.id);
    this.#prepared.delete(ctx.id);
    if (ctx.network.mode === 'disabled') {
      this.#published.set(ctx.id, []);
      return null;
    }
    return config;
  }

  /**
   * Publishes `ports` of box `id` through its slirp4netns API socket (`<id>.sock`) to `guestIp`, and
   * records them for `publishedPorts`. A port without `hostPort` gets a free one (retried up to 8 times
   * when another process takes it in between).
   * @throws BoxError naming `ports[i].hostPort` when a requested host port cannot be listened on.
   */
  protected async publish(id: string, ports: PortRequest[], guestIp: string): Promise<JsPublishedPort[]> {
    const published: JsPublishedPort[] = [];
    const api = this.file(id, 'sock');
    for (const [i, port] of ports.entries()) {
      let hostPort = port.hostPort;
      if (hostPort !== undefined && hostPort !== 0) {
        try {
          await addHostForward(api, port.hostIp, hostPort, guestIp, port.guestPort);
        } catch (error) {
          throw new BoxError(
            `invalid box option ports[${i}].hostPort: cannot listen on ${port.hostIp}:${hostPort} (${(error as Error).message})`,
            { field: `ports[${i}].hostPort`, cause: error },
          );
        }
      } else {
        for (let attempt = 0; ; attempt++) {
          hostPort = await freePort(port.hostIp);
          try {
            await addHostForward(api, port.hostIp, hostPort, guestIp, port.guestPort);
            break;
          } catch (error) {
            if (attempt >= 8) throw error;
          }
        }
      }
      published.push({ guestPort: port.guestPort, hostIp: port.hostIp, hostPort, protocol: 'tcp' });
    }
    this.#published.set(id, published);
    return published;
  }

  /** Forgets what `prepare` and `publish` recorded for box `id`. */
  protected forget(id: string): void {
    this.#published.delete(id);
    this.#prepared.delete(id);
  }
}
