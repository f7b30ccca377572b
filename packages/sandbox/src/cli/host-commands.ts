/**
 * The host commands of the `sandbox` command line: `sandbox doctor` checks the prerequisites
 * of the caller's account (exit status 1 when a required one is missing), `sandbox setup <user>`
 * prepares the host for an ordinary account (root).
 */
import type { Command } from 'commander';
import { formatDoctorReport, lookupUser, runDoctor } from './doctor.ts';
import { formatSetupReport, runSetup } from './setup.ts';

/** Adds `doctor` and `setup` to `program`. */
export function addHostCommands(program: Command): void {
  program
    .command('doctor')
    .description('check every prerequisite of running boxes as this user, with the fix for each')
    .option('--json', 'print the report as JSON')
    .option('--user <name>', 'check another account (root only; no live probes)')
    .action((opts, command: Command) => {
      const home = command.optsWithGlobals<{ home?: string }>().home ?? process.env.SANDBOX_HOME;
      let user: ReturnType<typeof lookupUser>;
      if (opts.user !== undefined) {
        user = lookupUser(opts.user);
        if (!user) throw new Error(`--user: no account named '${opts.user}'`);
      }
      const report = runDoctor({ ...(user ? { user } : {}), ...(home ? { homeDir: home } : {}) });
      process.stdout.write(opts.json ? `${JSON.stringify(report, null, 2)}\n` : formatDoctorReport(report));
      process.exitCode = report.ok ? 0 : 1;
    });

  program
    .command('setup')
    .description('(root) prepare the host for USER: packages, subordinate ids, a delegated cgroup subtree')
    .argument('<user>', 'account that will run boxes')
    .option('--dry-run', 'print what would be done, change nothing')
    .option('--json', 'print the report as JSON')
    .action((userName: string, opts) => {
      const report = runSetup(userName, { dryRun: opts.dryRun === true });
      process.stdout.write(opts.json ? `${JSON.stringify(report, null, 2)}\n` : formatSetupReport(report));
    });
}
