//! A daemon's configuration file whose keys are its long options (`--config FILE`), so the
//! file holds everything the command line holds and cannot drift from it:
//!
//! ```toml
//! udp = ["192.0.2.53:53", "[2001:db8::53]:53"]   # a repeatable option: a list
//! root-hints = "root.hints"                      # or root_hints; a path relative to this file
//! cache-size = 256                               # numbers as numbers
//! require-pq = true                              # a switch: true or false
//! user = "pqdns"
//! ```
//!
//! An option given on the command line wins: the file's value of that option is not used
//! (for a repeatable option, the file's whole list). The values of path-valued options that
//! are relative are made relative to the file's directory. Unknown keys, values of the wrong
//! kind and values the option refuses are errors naming the file and the line.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::parser::ValueSource;

/// Why a configuration file could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OptionFileError {
    /// The file could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// TOML syntax (the message has the line).
    #[error("{}: {message}", path.display())]
    Toml {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// A key or its value is wrong: `file:line`, and what is wrong.
    #[error("{}:{line}: {message}", path.display())]
    Setting {
        /// The file.
        path: PathBuf,
        /// Line (from 1) of the key.
        line: usize,
        /// What is wrong.
        message: String,
    },
}

/// Parses the process's command line as `T`, with the options of the configuration file named
/// by the option `config_id` (a `PathBuf`), if given, added where the command line does not
/// give them. Exits as clap does for help, version and command-line errors; a problem in the
/// file is printed with its file and line and exits with status 1.
pub fn parse<T: clap::Parser>(config_id: &str) -> T {
    parse_beside_tables(config_id, &[])
}

/// As [`parse`], for a file that also holds the tables named `tables` (e.g.
/// `forward-zone` for `[[forward-zone]]`), which are not options: the program reads them
/// itself.
pub fn parse_beside_tables<T: clap::Parser>(config_id: &str, tables: &[&str]) -> T {
    let argv: Vec<OsString> = std::env::args_os().collect();
    match merged_args_beside_tables(&T::command(), argv, config_id, tables) {
        Ok(args) => T::parse_from(args),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1)
        }
    }
}

/// `argv` with the options of the configuration file added after it (see the module
/// documentation); `argv` unchanged when it names no file or does not parse (clap then
/// reports the error itself).
///
/// # Errors
/// [`OptionFileError`] for a file that cannot be read or parsed, an unknown key, a value of
/// the wrong kind or one the option refuses.
pub fn merged_args(
    command: &clap::Command,
    argv: Vec<OsString>,
    config_id: &str,
) -> Result<Vec<OsString>, OptionFileError> {
    merged_args_beside_tables(command, argv, config_id, &[])
}

/// As [`merged_args`], skipping the top-level keys `tables` (read by the program itself).
///
/// # Errors
/// As [`merged_args`].
pub fn merged_args_beside_tables(
    command: &clap::Command,
    argv: Vec<OsString>,
    config_id: &str,
    tables: &[&str],
) -> Result<Vec<OsString>, OptionFileError> {
    let Ok(matches) = command.clone().try_get_matches_from(&argv) else {
        return Ok(argv);
    };
    let Some(path) = matches.get_one::<PathBuf>(config_id).cloned() else {
        return Ok(argv);
    };
    let text = std::fs::read_to_string(&path).map_err(|source| OptionFileError::Io {
        path: path.clone(),
        source,
    })?;
    let table: toml::map::Map<String, toml::Value> =
        toml::from_str(&text).map_err(|e: toml::de::Error| OptionFileError::Toml {
            path: path.clone(),
            message: e.to_string(),
        })?;
    let base = path.parent().unwrap_or(Path::new("."));
    let mut args = argv;
    for (key, value) in table {
        if tables.contains(&key.as_str()) {
            continue;
        }
        let line = key_line(&text, &key);
        let setting_error = |message: String| OptionFileError::Setting {
            path: path.clone(),
            line,
            message,
        };
        let long = key.replace('_', "-");
        let arg = command
            .get_arguments()
            .find(|a| a.get_long() == Some(long.as_str()) && a.get_id() != config_id)
            .ok_or_else(|| setting_error(format!("unknown setting `{key}` (see --help)")))?;
        if matches.value_source(arg.get_id().as_str()) == Some(ValueSource::CommandLine) {
            continue;
        }
        let long = arg.get_long().unwrap_or_default();
        let Some(values) =
            option_values(arg, &value, base).map_err(|m| setting_error(format!("{key}: {m}")))?
        else {
            // A switch.
            if value.as_bool() == Some(true) {
                args.push(format!("--{long}").into());
            }
            continue;
        };
        // The values alone through the option's value parser, so that a refused one is
        // placed at its line (the whole command line is parsed later).
        let alone = clap::Arg::new(arg.get_id().clone())
            .value_parser(arg.get_value_parser().clone())
            .num_args(1..);
        let one = std::iter::once("setting".to_owned()).chain(values.iter().cloned());
        if let Err(e) = clap::Command::new("setting")
            .arg(alone)
            .try_get_matches_from(one)
        {
            let message = e.render().to_string();
            let first = message.lines().next().unwrap_or_default();
            return Err(setting_error(format!(
                "{key}: {}",
                first.trim_start_matches("error: ")
            )));
        }
        args.extend(
            values
                .iter()
                .map(|v| OsString::from(format!("--{long}={v}"))),
        );
    }
    Ok(args)
}

/// The values `value` gives `arg`, as text (a relative path made relative to `base`);
/// `None` for a switch, whose value must be true or false.
fn option_values(
    arg: &clap::Arg,
    value: &toml::Value,
    base: &Path,
) -> Result<Option<Vec<String>>, String> {
    if !arg.get_action().takes_values() {
        return match value {
            toml::Value::Boolean(_) => Ok(None),
            _ => Err("expected true or false".into()),
        };
    }
    let is_path = arg.get_value_parser().type_id() == std::any::TypeId::of::<PathBuf>();
    let repeatable = matches!(arg.get_action(), clap::ArgAction::Append);
    let items: Vec<&toml::Value> = match value {
        toml::Value::Array(items) if repeatable => items.iter().collect(),
        toml::Value::Array(_) => return Err("takes one value, not a list".into()),
        one => vec![one],
    };
    items
        .into_iter()
        .map(|item| match item {
            toml::Value::String(s) if is_path && Path::new(s).is_relative() => {
                Ok(base.join(s).display().to_string())
            }
            toml::Value::String(s) => Ok(s.clone()),
            toml::Value::Integer(n) => Ok(n.to_string()),
            toml::Value::Float(f) => Ok(f.to_string()),
            toml::Value::Boolean(b) => Ok(b.to_string()),
            other => Err(format!(
                "a {} is not a value of this option",
                other.type_str()
            )),
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// The line (from 1) where `key` is set at the top level of `text` (1 if not found, e.g. a
/// quoted key).
fn key_line(text: &str, key: &str) -> usize {
    text.lines()
        .position(|l| {
            l.trim_start()
                .strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        })
        .map_or(1, |i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    #[derive(Debug, Parser)]
    #[command(name = "daemon")]
    struct Cli {
        #[arg(long)]
        config: Option<PathBuf>,
        #[arg(long)]
        udp: Vec<std::net::SocketAddr>,
        #[arg(long)]
        hints: Option<PathBuf>,
        #[arg(long, default_value_t = 64)]
        cache_size: u32,
        #[arg(long)]
        require_pq: bool,
        #[arg(long, requires = "hints")]
        strict: bool,
    }

    /// `cli` parsed with `file` as the configuration file in a directory of its own (returned).
    fn parse(file: &str, cli: &[&str]) -> Result<(Cli, tempfile::TempDir), OptionFileError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.toml");
        std::fs::write(&path, file).unwrap();
        let mut argv: Vec<OsString> = vec!["daemon".into(), "--config".into(), path.into()];
        argv.extend(cli.iter().map(OsString::from));
        let args = merged_args(&Cli::command(), argv, "config")?;
        Ok((Cli::try_parse_from(args).unwrap(), dir))
    }

    #[test]
    fn the_file_fills_in_what_the_command_line_leaves_out() {
        let (cli, dir) = parse(
            "udp = [\"127.0.0.1:53\", \"[::1]:53\"]\nhints = \"root.hints\"\ncache_size = 256\n\
             require-pq = true\nstrict = false\n",
            &["--cache-size", "8"],
        )
        .unwrap();
        assert_eq!(cli.udp.len(), 2);
        assert_eq!(
            cli.hints.unwrap(),
            dir.path().join("root.hints"),
            "relative to the file"
        );
        assert_eq!(cli.cache_size, 8, "the command line wins");
        assert!(cli.require_pq && !cli.strict);
        let (cli, _) = parse("udp = [\"127.0.0.1:53\"]\n", &["--udp", "127.0.0.2:53"]).unwrap();
        assert_eq!(
            cli.udp,
            vec!["127.0.0.2:53".parse().unwrap()],
            "no merging of lists"
        );
    }

    #[test]
    fn errors_name_the_line_and_the_setting() {
        let cases = [
            (
                "cache-size = 1\ncolour = 2\n",
                "d.toml:2",
                "unknown setting `colour`",
            ),
            ("\nudp = [\"nonsense\"]\n", "d.toml:2", "nonsense"),
            ("cache_size = \"big\"\n", "d.toml:1", "big"),
            ("hints = [\"a\", \"b\"]\n", "d.toml:1", "not a list"),
            ("require_pq = 1\n", "d.toml:1", "true or false"),
            ("udp = [\n", "d.toml", "line 1"),
        ];
        for (file, place, what) in cases {
            let e = parse(file, &[]).unwrap_err().to_string();
            assert!(e.contains(place) && e.contains(what), "{file:?}: {e}");
        }
    }

    #[test]
    fn tables_the_program_reads_are_skipped_only_when_named() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.toml");
        std::fs::write(
            &path,
            "cache-size = 8\n[[forward-zone]]\nname = \"corp.example.\"\n",
        )
        .unwrap();
        let argv =
            || -> Vec<OsString> { vec!["daemon".into(), "--config".into(), path.clone().into()] };
        let args = merged_args_beside_tables(&Cli::command(), argv(), "config", &["forward-zone"])
            .unwrap();
        assert_eq!(Cli::try_parse_from(args).unwrap().cache_size, 8);
        let e = merged_args(&Cli::command(), argv(), "config").unwrap_err();
        assert!(
            e.to_string().contains("unknown setting `forward-zone`"),
            "{e}"
        );
    }
}
