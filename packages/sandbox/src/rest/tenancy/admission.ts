/**
 * Quotas and admission control of box creation. Before a box is created the caller's
 * tenant usage (its running boxes, their vCPUs and memory, the disk of all its boxes) plus what creations
 * in flight hold must leave room for the new box under the tenant's quotas (`limits.ts`), else BoxError
 * `quota_exceeded` (429) naming the quota; and the node must hold it — committed memory under
 * `MemTotal × memory_overcommit − reserve` and under `MemAvailable − reserve`, the box's disk (thin:
 * it takes blocks as they are written) under the free space of the runtime's filesystem minus its
 * reserve, the processes under the kernel's limit — else
 * `capacity` (503, `Retry-After`). A box asking for more vCPUs than the node has, or more memory than it
 * has in all, can never run: `invalid_option` (400) naming the option.
 *
 * Atomic: checks run one at a time and a passed check holds its reservation until the creation ended
 * (then the box itself is counted), so that concurrent creations never pass together beyond a limit.
 */
import { readFileSync } from 'node:fs';
import { statfs } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { DEFAULT_CPUS, DEFAULT_MEMORY_MIB } from '../../constants.ts';
import { DEFAULT_DISK_SIZE_GB } from '../../engine/disk.ts';
import { BoxError } from '../../errors.ts';
import type { JsBoxInfo, JsBoxOptions } from '../../types.ts';
import type { LimitsFile, TenantLimits } from './limits.ts';
import type { Owners } from './owners.ts';

/** What a new box asks for: vCPUs, memory MiB, disk GiB. */
export interface BoxRequest {
  cpus: number;
  memoryMib: number;
  diskGb: number;
}

/** A tenant's use of the node: running boxes, their vCPUs and memory (MiB), its boxes' disk (GiB). */
export interface TenantUsage {
  runningBoxes: number;
  vcpus: number;
  memoryMib: number;
  diskGb: number;
}

/** What `options` ask for, the runtime defaults filled in. */
export function boxRequestOf(options: Pick<JsBoxOptions, 'cpus' | 'memoryMib' | 'diskSizeGb'>): BoxRequest {
  return {
    cpus: options.cpus ?? DEFAULT_CPUS,
    memoryMib: options.memoryMib ?? DEFAULT_MEMORY_MIB,
    diskGb: options.diskSizeGb ?? DEFAULT_DISK_SIZE_GB,
  };
}

/** `/proc/meminfo` fields in MiB (`MemTotal`, `MemAvailable`). */
function meminfo(): { totalMib: number; availableMib: number } {
  const text = readFileSync('/proc/meminfo', 'utf8');
  const field = (name: string) =>
    Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? 0) / 1024;
  return { totalMib: field('MemTotal'), availableMib: field('MemAvailable') };
}

/** Threads on the host now and the kernel's limit (min of `pid_max`, `threads-max`). */
function processes(): { count: number; limit: number } {
  const count = Number(readFileSync('/proc/loadavg', 'utf8').split(' ')[3]?.split('/')[1] ?? 0);
  const read = (path: string) => Number(readFileSync(path, 'utf8').trim());
  return { count, limit: Math.min(read('/proc/sys/kernel/pid_max'), read('/proc/sys/kernel/threads-max')) };
}

const QUOTA_NAMES: [keyof TenantLimits, keyof TenantUsage, keyof BoxRequest | null, string][] = [
  ['running_boxes', 'runningBoxes', null, 'running boxes'],
  ['vcpus', 'vcpus', 'cpus', 'vCPUs'],
  ['memory_mib', 'memoryMib', 'memoryMib', 'MiB of memory'],
  ['disk_gb', 'diskGb', 'diskGb', 'GiB of disk'],
];

/** The admission control of one server (see the module comment). */
export class Admission {
  readonly #limits: LimitsFile;
  readonly #owners: Owners;
  readonly #list: () => Promise<JsBoxInfo[]>;
  readonly #dataDir: () => string;
  /** Creations in flight: their tenant and request. */
  readonly #pending = new Set<{ tenant: string; request: BoxRequest }>();
  /** Warm pools by id: the boxes each keeps ready (running, not listed by the runtime). */
  readonly #held = new Map<string, { tenant: string; request: BoxRequest; count: number }>();
  #queue: Promise<unknown> = Promise.resolve();

  /**
   * @param list every box of the runtime; `dataDir` the directory whose filesystem holds box disks.
   */
  constructor(limits: LimitsFile, owners: Owners, list: () => Promise<JsBoxInfo[]>, dataDir: () => string) {
    this.#limits = limits;
    this.#owners = owners;
    this.#list = list;
    this.#dataDir = dataDir;
  }

  /** Usage of every tenant with boxes, from the runtime's boxes (pending creations not included). */
  async usageByTenant(): Promise<Map<string, TenantUsage>> {
    const usage = new Map<string, TenantUsage>();
    for (const info of await this.#list()) {
      const tenant = this.#owners.tenantOf('box', info.id);
      const entry = usage.get(tenant) ?? { runningBoxes: 0, vcpus: 0, memoryMib: 0, diskGb: 0 };
      usage.set(tenant, entry);
      entry.diskGb += this.#owners.get('box', info.id)?.diskGb ?? DEFAULT_DISK_SIZE_GB;
      if (info.state.running) {
        entry.runningBoxes++;
        entry.vcpus += info.cpus;
        entry.memoryMib += info.memoryMib;
      }
    }
    for (const { tenant, request, count } of this.#held.values()) {
      const entry = usage.get(tenant) ?? { runningBoxes: 0, vcpus: 0, memoryMib: 0, diskGb: 0 };
      usage.set(tenant, entry);
      entry.runningBoxes += count;
      entry.vcpus += request.cpus * count;
      entry.memoryMib += request.memoryMib * count;
      entry.diskGb += request.diskGb * count;
    }
    return usage;
  }

  /** Usage of `tenant` (zeros when it has no boxes). */
  async usage(tenant: string): Promise<TenantUsage> {
    return (await this.usageByTenant()).get(tenant) ?? { runningBoxes: 0, vcpus: 0, memoryMib: 0, diskGb: 0 };
  }

  /**
   * Admits a box of `request` for `tenant` (the operator is bound by the node only), runs `create`, and
   * counts the box as pending until `create` settled.
   * @throws BoxError `quota_exceeded` (field: the quota), `capacity` (field: the resource, `retryAfterMs`),
   *   `invalid_option` (field `cpus` or `memoryMib`: more than the node has), or what `create` throws.
   */
  async admit<T>(
    tenant: string,
    operator: boolean,
    request: BoxRequest,
    create: () => Promise<T>,
  ): Promise<T> {
    const entry = { tenant, request };
    const check = this.#queue.then(async () => {
      await this.#check(tenant, operator, request);
      this.#pending.add(entry);
    });
    this.#queue = check.catch(() => {});
    await check;
    try {
      return await create();
    } finally {
      this.#pending.delete(entry);
    }
  }

  /**
   * Admits warm pool `poolId` of `tenant` keeping `count` boxes of `request` ready, as if they were
   * created at once; they count as the tenant's running boxes until {@link releasePool}.
   * @throws as {@link admit}.
   */
  async admitPool(
    poolId: string,
    tenant: string,
    operator: boolean,
    request: BoxRequest,
    count: number,
  ): Promise<void> {
    const check = this.#queue.then(async () => {
      await this.#check(tenant, operator, request, count);
      this.#held.set(poolId, { tenant, request, count });
    });
    this.#queue = check.catch(() => {});
    await check;
  }

  /** Stops counting the boxes of warm pool `poolId` (it was closed). */
  releasePool(poolId: string): void {
    this.#held.delete(poolId);
  }

  async #check(tenant: string, operator: boolean, request: BoxRequest, count = 1): Promise<void> {
    const node = this.#limits.current().node;
    const cores = availableParallelism();
    if (request.cpus > cores) {
      throw new BoxError(`invalid box option cpus: at most ${cores} (the CPUs of this node)`, {
        field: 'cpus',
      });
    }
    const memory = meminfo();
    if (request.memoryMib > memory.totalMib - node.reserve_memory_mib) {
      throw new BoxError(
        `invalid box option memoryMib: at most ${Math.floor(memory.totalMib - node.reserve_memory_mib)} (this node's memory less its reserve)`,
        { field: 'memoryMib' },
      );
    }
    const byTenant = await this.usageByTenant();
    const pending = [...this.#pending];
    if (!operator) {
      const limits = this.#limits.tenant(tenant);
      const usage = byTenant.get(tenant) ?? { runningBoxes: 0, vcpus: 0, memoryMib: 0, diskGb: 0 };
      for (const p of pending) {
        if (p.tenant !== tenant) continue;
        usage.runningBoxes++;
        usage.vcpus += p.request.cpus;
        usage.memoryMib += p.request.memoryMib;
        usage.diskGb += p.request.diskGb;
      }
      for (const [quota, used, asked, what] of QUOTA_NAMES) {
        const max = limits[quota];
        if (max === null) continue;
        const want = (used === 'runningBoxes' ? 1 : request[asked as keyof BoxRequest]) * count;
        if (usage[used] + want > max) {
          throw new BoxError(
            `quota exceeded: ${quota} (tenant ${tenant} uses ${usage[used]} of ${max} ${what}; ${count === 1 ? 'this box asks' : `${count} boxes ask`} for ${want})`,
            { code: 'quota_exceeded', field: quota },
          );
        }
      }
    }
    const retryAfterMs = node.retry_after_s * 1000;
    const capacity = (field: string, message: string) =>
      new BoxError(`node at capacity: ${message}`, { code: 'capacity', field, retryAfterMs });
    let committed = request.memoryMib * count;
    for (const usage of byTenant.values()) committed += usage.memoryMib;
    for (const p of pending) committed += p.request.memoryMib;
    const ceiling = memory.totalMib * node.memory_overcommit - node.reserve_memory_mib;
    if (committed > ceiling) {
      throw capacity(
        'memory',
        `running boxes would hold ${committed} MiB of memory, the node admits ${Math.floor(ceiling)}`,
      );
    }
    const pendingMemory = pending.reduce((sum, p) => sum + p.request.memoryMib, 0);
    if (request.memoryMib * count + pendingMemory > memory.availableMib - node.reserve_memory_mib) {
      throw capacity(
        'memory',
        `${Math.floor(memory.availableMib)} MiB available, ${node.reserve_memory_mib} MiB kept for the host`,
      );
    }
    const fs = await statfs(this.#dataDir());
    const freeGb = (fs.bavail * fs.bsize) / 1024 ** 3;
    // Box disks are thin (they take blocks as they are written): each must fit in what is free now.
    if (request.diskGb > freeGb - node.reserve_disk_gb) {
      throw capacity(
        'disk',
        `${freeGb.toFixed(1)} GiB free, ${node.reserve_disk_gb} GiB kept free, ${request.diskGb} GiB asked`,
      );
    }
    const procs = processes();
    if (procs.count + (pending.length + count) * node.pids_per_box > procs.limit * 0.9) {
      throw capacity('processes', `${procs.count} processes of the kernel's limit ${procs.limit}`);
    }
  }
}
