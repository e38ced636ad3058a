//! `coreserve serve --config FILE`: the service's settings from a TOML file.
//!
//! Every flag of `serve` has an environment variable (`CORESERVE_<NAME>`; the database is
//! `DATABASE_URL`), and clap already prefers the command line to the environment and the
//! environment to the defaults. The file adds one level below the environment: each of its
//! settings is exported as its flag's variable unless that variable is set already, before the
//! command line is parsed. So the precedence is **command line > environment > file >
//! defaults**, and a setting means the same wherever it is given.
//!
//! Keys are the flags' long names with `_` for `-` (`w_interval_s = 1800`), plus
//! `database_url`. Values are strings, integers, floats, booleans (switches) or arrays of
//! strings (flags given once per value, such as `lis = ["s1=https://...", "s2=..."]`). An
//! unknown key, or a value of another type, is an error that names it. One table is read:
//! `[sites.ID.slurm]`, a Slurm site's own settings (`partition`, `slurm_conf`, `users`,
//! `default_user`, `prefix`, `sync_s`, `scontrol`), so that one process can front several
//! Slurm clusters; the `sites` tables reach `serve` as `CORESERVE_SLURM_SITES` (JSON).

use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::CommandFactory;

/// The file named by `serve --config FILE` (or `--config=FILE`), else by `CORESERVE_CONFIG`;
/// `None` for other commands.
fn config_path(args: &[OsString]) -> Option<PathBuf> {
    if args.get(1).and_then(|a| a.to_str()) != Some("serve") {
        return None;
    }
    let mut it = args.iter().skip(2);
    while let Some(a) = it.next() {
        let a = a.to_string_lossy();
        if a == "--config" {
            return it.next().map(PathBuf::from);
        }
        if let Some(path) = a.strip_prefix("--config=") {
            return Some(PathBuf::from(path));
        }
    }
    std::env::var_os("CORESERVE_CONFIG").filter(|p| !p.is_empty()).map(PathBuf::from)
}

/// The environment variable of each `serve` setting: `(key, variable)`, a flag's aliases
/// (`mode` for `method`) included.
fn settings() -> Vec<(String, String)> {
    let cli = super::Cli::command();
    let serve = cli.find_subcommand("serve").expect("the serve subcommand");
    let mut out: Vec<(String, String)> = serve
        .get_arguments()
        .filter(|a| a.get_id() != "config")
        .filter_map(|a| {
            let var = a.get_env()?.to_string_lossy().into_owned();
            let names = std::iter::once(a.get_long()?).chain(a.get_all_aliases().unwrap_or_default());
            Some(names.map(move |name| (name.replace('-', "_"), var.clone())))
        })
        .flatten()
        .collect();
    out.push(("database_url".into(), "DATABASE_URL".into()));
    out
}

/// The variables a file's `text` sets: `(variable, value)` for every key whose variable
/// `is_set` does not report as set already.
///
/// # Errors
/// Not TOML; an unknown key; a value that is a table, a date or a non-string array item.
pub fn resolve(text: &str, is_set: impl Fn(&str) -> bool) -> Result<Vec<(String, String)>> {
    let table: toml::Table = text.parse().context("not a TOML file")?;
    let settings = settings();
    let mut out = Vec::new();
    // The key that set each variable, so that a setting is not given twice under two names.
    let mut keys = std::collections::HashMap::new();
    for (key, value) in table {
        // `[sites.ID.slurm]` tables: per-site Slurm settings, handed on as JSON.
        let (key, value) = match (key.as_str(), value) {
            ("sites", toml::Value::Table(t)) => {
                let json = serde_json::to_string(&t).context("`sites`: not representable as JSON")?;
                ("slurm_sites".to_owned(), toml::Value::String(json))
            }
            (_, value) => (key, value),
        };
        let Some((_, var)) = settings.iter().find(|(k, _)| *k == key) else {
            let known: Vec<&str> = settings.iter().map(|(k, _)| k.as_str()).collect();
            bail!("unknown setting `{key}` (the settings: {})", known.join(", "));
        };
        let text = match value {
            toml::Value::String(s) => s,
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Float(f) => f.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            toml::Value::Array(items) => items
                .into_iter()
                .map(|v| match v {
                    toml::Value::String(s) if !s.contains(',') => Ok(s),
                    other => bail!("`{key}`: every item must be a string without commas, not {other}"),
                })
                .collect::<Result<Vec<_>>>()?
                .join(","),
            other => bail!("`{key}`: a {} is not a setting's value", other.type_str()),
        };
        if let Some(other) = keys.insert(var.as_str(), key.clone()) {
            bail!("`{other}` and `{key}` are the same setting: give it once");
        }
        if !is_set(var) {
            out.push((var.clone(), text));
        }
    }
    Ok(out)
}

/// Applies the config file of `serve` (see the module docs) to this process's environment, and
/// reads `CORESERVE_MODE` as `CORESERVE_METHOD` when only the old name is set.
/// Call it before the command line is parsed and before any other thread starts.
///
/// # Errors
/// The file cannot be read, or [`resolve`] refuses it; the error names the file.
pub fn apply(args: &[OsString]) -> Result<()> {
    // `CORESERVE_MODE`, the round-1 name of `CORESERVE_METHOD`, is still read.
    if let (None, Some(old)) = (std::env::var_os("CORESERVE_METHOD"), std::env::var_os("CORESERVE_MODE")) {
        std::env::set_var("CORESERVE_METHOD", old);
    }
    let Some(path) = config_path(args) else { return Ok(()) };
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading the config file {}", path.display()))?;
    let vars =
        resolve(&text, |v| std::env::var_os(v).is_some()).with_context(|| format!("config file {}", path.display()))?;
    for (var, value) in vars {
        // Single-threaded still: main calls this before it starts the runtime.
        std::env::set_var(var, value);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_serve_flag_has_a_variable() {
        let cli = super::super::Cli::command();
        let serve = cli.find_subcommand("serve").unwrap();
        for a in serve.get_arguments().filter(|a| a.get_long().is_some()) {
            assert!(a.get_env().is_some(), "--{} has no CORESERVE_ variable", a.get_long().unwrap());
        }
    }

    #[test]
    fn the_environment_wins_over_the_file_and_arrays_become_lists() {
        let text = "listen = \"0.0.0.0:9000\"\nw_interval_s = 600\nlis = [\"s1=http://a\", \"s2=http://b\"]\ndatabase_url = \"postgres://x/y\"\n";
        let mut got = resolve(text, |v| v == "CORESERVE_LISTEN").unwrap();
        got.sort();
        assert_eq!(
            got,
            vec![
                ("CORESERVE_LIS".to_string(), "s1=http://a,s2=http://b".to_string()),
                ("CORESERVE_W_INTERVAL_S".to_string(), "600".to_string()),
                ("DATABASE_URL".to_string(), "postgres://x/y".to_string()),
            ]
        );
    }

    #[test]
    fn unknown_keys_and_odd_values_are_refused_by_name() {
        let e = resolve("listn = \"x\"", |_| false).unwrap_err().to_string();
        assert!(e.contains("unknown setting `listn`") && e.contains("listen"), "{e}");
        let e = resolve("planners = { a = 1 }", |_| false).unwrap_err().to_string();
        assert!(e.contains("`planners`"), "{e}");
        let e = resolve("lis = [1]", |_| false).unwrap_err().to_string();
        assert!(e.contains("`lis`"), "{e}");
        assert!(resolve("not toml [", |_| false).is_err());
    }

    #[test]
    fn sites_tables_become_per_site_slurm_settings() {
        let text = "[sites.s1.slurm]\npartition = \"batch\"\nslurm_conf = \"/a/slurm.conf\"\n[sites.s2.slurm]\npartition = \"gpu\"\nusers = { alice = \"asmith\" }\n";
        let got = resolve(text, |_| false).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, "CORESERVE_SLURM_SITES");
        let json: serde_json::Value = serde_json::from_str(&got[0].1).unwrap();
        assert_eq!(json["s1"]["slurm"]["slurm_conf"], "/a/slurm.conf");
        assert_eq!(json["s2"]["slurm"]["users"]["alice"], "asmith");
    }

    #[test]
    fn method_is_also_read_under_its_old_name_mode() {
        assert_eq!(resolve("method = \"bbr\"", |_| false).unwrap(), vec![("CORESERVE_METHOD".into(), "bbr".into())]);
        assert_eq!(resolve("mode = \"bbr\"", |_| false).unwrap(), vec![("CORESERVE_METHOD".into(), "bbr".into())]);
        let e = resolve("method = \"bbr\"\nmode = \"bir\"", |_| false).unwrap_err().to_string();
        assert!(e.contains("`method` and `mode` are the same setting"), "{e}");
    }

    #[test]
    fn planning_permits_are_also_read_under_their_old_name_planning_slots() {
        let var = ("CORESERVE_PLANNING_PERMITS".to_owned(), "4".to_owned());
        assert_eq!(resolve("planning_permits = 4", |_| false).unwrap(), vec![var.clone()]);
        assert_eq!(resolve("planning_slots = 4", |_| false).unwrap(), vec![var]);
    }

    #[test]
    fn the_file_is_found_only_for_serve() {
        let args = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(config_path(&args(&["coreserve", "serve", "--config", "a.toml"])), Some(PathBuf::from("a.toml")));
        assert_eq!(config_path(&args(&["coreserve", "serve", "--config=b.toml"])), Some(PathBuf::from("b.toml")));
        assert_eq!(config_path(&args(&["coreserve", "demo", "--config", "a.toml"])), None);
    }
}
