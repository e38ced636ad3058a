//! A real Slurm cluster for the Slurm LIS tests: munged, slurmctld and one slurmd from
//! Debian's packages, started by the repository's `scripts/slurm-local` in a directory of its
//! own on free ports, stopped (and the directory deleted) when dropped. No mock: a test that
//! cannot start Slurm fails, naming what is missing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use coreserve::lis::slurm::{parse_reservations, SlurmConfig, SlurmReservation, DEFAULT_PREFIX};

/// The partition `scripts/slurm-local` makes.
pub const PARTITION: &str = "batch";

/// The license a cluster started with GPUs counts them by (`scripts/slurm-local`).
pub const GPU_LICENSE: &str = "gpu";

/// One local Slurm cluster (one node of `cpus` cores, and maybe GPUs).
pub struct SlurmCluster {
    dir: PathBuf,
    /// Its slurm.conf (`SLURM_CONF`).
    pub conf: PathBuf,
    /// Its partition.
    pub partition: String,
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/slurm-local")
}

impl SlurmCluster {
    /// Starts a cluster whose node has `cpus` cores. Panics, with the script's words, when
    /// Slurm cannot start (e.g. `slurm-wlm` or `munge` not installed: `.ci/test` installs them).
    pub fn start(cpus: u32) -> SlurmCluster {
        SlurmCluster::start_with(cpus, PARTITION, 0)
    }

    /// Starts a cluster whose node has `cpus` cores and declares `gpus` GPUs (`Gres=gpu:N`, no
    /// real device; counted by license [`GPU_LICENSE`]), partition `partition`. Panics as
    /// [`SlurmCluster::start`].
    pub fn start_with(cpus: u32, partition: &str, gpus: u32) -> SlurmCluster {
        let dir = tempfile::Builder::new().prefix("coreserve-slurm.").tempdir().unwrap().keep();
        let out = Command::new(script())
            .args(["start"])
            .arg(&dir)
            .arg(cpus.to_string())
            .arg(partition)
            .arg(gpus.to_string())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "scripts/slurm-local start failed (the Slurm tests need Debian's slurm-wlm and munge, and root):\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let conf = dir.join("slurm.conf");
        SlurmCluster { dir, conf, partition: partition.to_owned() }
    }

    /// A Slurm site's configuration for this cluster: every coreserve user books as `root`,
    /// synchronised every `sync_s` seconds.
    pub fn config(&self, sync_s: u64) -> SlurmConfig {
        SlurmConfig {
            slurm_conf: Some(self.conf.clone()),
            default_user: Some("root".into()),
            sync_s,
            ..SlurmConfig::new(self.partition.clone())
        }
    }

    /// A Slurm command (`scontrol`, `sbatch`, ...) against this cluster, in UTC.
    pub fn run(&self, program: &str, args: &[&str]) -> Output {
        Command::new(program).args(args).env("SLURM_CONF", &self.conf).env("TZ", "UTC").output().unwrap()
    }

    /// `scontrol ARGS`, which must succeed; its standard output.
    pub fn scontrol(&self, args: &[&str]) -> String {
        let out = self.run("scontrol", args);
        assert!(out.status.success(), "scontrol {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Every reservation Slurm has.
    pub fn reservations(&self) -> Vec<SlurmReservation> {
        let out = self.run("scontrol", &["show", "reservation", "--oneliner"]);
        parse_reservations(&String::from_utf8_lossy(&out.stdout)).unwrap()
    }

    /// coreserve's reservations (named with the default prefix).
    pub fn ours(&self) -> Vec<SlurmReservation> {
        self.reservations().into_iter().filter(|r| r.name.starts_with(DEFAULT_PREFIX)).collect()
    }

    /// Stops slurmctld alone (slurmd and munged keep running).
    pub fn stop_controller(&self) {
        let out = Command::new(script()).arg("ctld-stop").arg(&self.dir).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }

    /// Starts slurmctld again (with the state it saved).
    pub fn start_controller(&self) {
        let out = Command::new(script()).arg("ctld-start").arg(&self.dir).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }

    /// The cluster's directory (logs in `log/`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for SlurmCluster {
    fn drop(&mut self) {
        let _ = Command::new(script()).arg("stop").arg(&self.dir).output();
    }
}
