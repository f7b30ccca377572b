/**
 * Per-tenant Prometheus gauges of the shared service, in the server's metrics registry (`GET /metrics`,
 * operators only), computed at scrape time from the runtime's boxes and their owners:
 * `sandbox_tenant_running_boxes{tenant}`, `sandbox_tenant_vcpus{tenant}`,
 * `sandbox_tenant_memory_mib{tenant}` (running boxes) and `sandbox_tenant_disk_gb{tenant}` (all boxes).
 */
import { Gauge, type Registry } from 'prom-client';
import type { Admission, TenantUsage } from './admission.ts';

const GAUGES: [string, keyof TenantUsage, string][] = [
  ['sandbox_tenant_running_boxes', 'runningBoxes', "the tenant's running boxes"],
  ['sandbox_tenant_vcpus', 'vcpus', "vCPUs of the tenant's running boxes"],
  ['sandbox_tenant_memory_mib', 'memoryMib', "memory of the tenant's running boxes, MiB"],
  ['sandbox_tenant_disk_gb', 'diskGb', "disk of all the tenant's boxes, GiB"],
];

/** Registers the per-tenant gauges on `registry` (one usage computation per scrape). */
export function registerTenantMetrics(registry: Registry, admission: Admission): void {
  let scrape: Promise<Map<string, TenantUsage>> | null = null;
  const usage = () => {
    // The gauges of one scrape share one computation.
    scrape ??= admission.usageByTenant().finally(() => setImmediate(() => (scrape = null)));
    return scrape;
  };
  for (const [name, field, help] of GAUGES) {
    new Gauge({
      name,
      help,
      labelNames: ['tenant'] as const,
      registers: [registry],
      async collect() {
        this.reset();
        for (const [tenant, figures] of await usage()) this.set({ tenant }, figures[field]);
      },
    });
  }
}
