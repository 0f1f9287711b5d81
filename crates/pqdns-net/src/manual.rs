//! A daemon's manual from its command line (clap): the man page (roff, `clap_mangen`) and
//! shell completion scripts (`clap_complete`), printed by `--generate KIND` so that packages
//! install them (`dist/build-deb.sh`) without a build step of their own, as ripgrep's
//! `--generate` does.

use std::io::Write;
use std::process::ExitCode;

use clap_complete::Shell;

use crate::logging::{self, LogFormat};

/// What `--generate` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Generate {
    /// The man page, roff (section 8 for daemons, as the package installs it).
    Man,
    /// bash completion script.
    CompleteBash,
    /// zsh completion script.
    CompleteZsh,
    /// fish completion script.
    CompleteFish,
}

/// Writes `kind` for the command `cmd` (named as installed, e.g. `pqdns-server`) to `out`.
/// Everything is rendered in memory first: `clap_complete` panics on a failed write, and a
/// closed or full standard output must give an error, not a panic.
///
/// # Errors
/// The I/O error of writing.
pub fn generate(
    kind: Generate,
    mut cmd: clap::Command,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let name = cmd.get_name().to_owned();
    let mut text = Vec::new();
    match kind {
        Generate::Man => clap_mangen::Man::new(cmd).section("8").render(&mut text)?,
        Generate::CompleteBash => clap_complete::generate(Shell::Bash, &mut cmd, name, &mut text),
        Generate::CompleteZsh => clap_complete::generate(Shell::Zsh, &mut cmd, name, &mut text),
        Generate::CompleteFish => clap_complete::generate(Shell::Fish, &mut cmd, name, &mut text),
    }
    out.write_all(&text)?;
    out.flush()
}

/// The options every daemon has (flattened into its command line): logging, the account to
/// run as, and `--generate`.
#[derive(Clone, Debug, clap::Args)]
pub struct DaemonArgs {
    /// Log filter: a level (error, warn, info, debug, trace) or tracing-subscriber directives
    /// such as `pqdns_net=debug` (debug shows TLS key exchange groups per connection).
    #[arg(long, value_name = "FILTER", default_value = "info")]
    pub log_level: String,

    /// Log line format: "text" (colours only on a terminal; no timestamps when standard error
    /// is the systemd journal, which adds its own) or "json" (one object per line).
    #[arg(long, value_name = "FORMAT", default_value = "text")]
    pub log_format: LogFormat,

    /// Once every listener is bound, run as this account: USER or USER:GROUP (start as root
    /// to bind port 53 and switch; no capability is kept). The files written afterwards
    /// (keys, state, the generated TLS certificate) belong to that user, so their
    /// directories must be writable by it. Started as root with a port below 1024 bound
    /// and no user, the daemon refuses to serve; `--user root` keeps root deliberately.
    #[arg(long, value_name = "USER[:GROUP]")]
    pub user: Option<crate::privilege::Account>,

    /// Print the man page (roff) or a shell completion script and exit.
    #[arg(long, value_name = "KIND", value_enum)]
    pub generate: Option<Generate>,
}

/// What every daemon does first with its parsed command line: print what `--generate` asks
/// for (the manual of `cmd`), or install the log subscriber (`--log-level`, `--log-format`).
/// `Some(code)` means exit with it now: after `--generate`, or on a bad log filter (2).
pub fn start(args: &DaemonArgs, cmd: impl FnOnce() -> clap::Command) -> Option<ExitCode> {
    let (log_level, log_format) = (args.log_level.as_str(), args.log_format);
    if let Some(kind) = args.generate {
        return Some(match generate(kind, cmd(), &mut std::io::stdout()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("--generate: {e}");
                ExitCode::FAILURE
            }
        });
    }
    if let Err(e) = logging::init(log_level, log_format) {
        eprintln!("{e}");
        return Some(ExitCode::from(2));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command() -> clap::Command {
        clap::Command::new("pqdns-example")
            .about("An example daemon.")
            .arg(
                clap::Arg::new("zone")
                    .long("zone")
                    .help("A zone description."),
            )
    }

    #[test]
    fn the_man_page_names_the_program_and_its_options() {
        let mut out = Vec::new();
        generate(Generate::Man, command(), &mut out).unwrap();
        let roff = String::from_utf8(out).unwrap();
        assert!(roff.starts_with(".ie \\n(.g .ds Aq"), "{roff}");
        assert!(roff.contains(".TH pqdns-example 8"), "{roff}");
        assert!(roff.contains("\\-\\-zone"), "{roff}");
    }

    /// A writer that always fails, as a full disk or a closed pipe does.
    struct Full;

    impl Write for Full {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::from(std::io::ErrorKind::StorageFull))
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_failed_write_is_an_error_not_a_panic() {
        for kind in [
            Generate::Man,
            Generate::CompleteBash,
            Generate::CompleteZsh,
            Generate::CompleteFish,
        ] {
            assert!(generate(kind, command(), &mut Full).is_err(), "{kind:?}");
        }
    }

    #[test]
    fn completions_cover_the_options() {
        for kind in [
            Generate::CompleteBash,
            Generate::CompleteZsh,
            Generate::CompleteFish,
        ] {
            let mut out = Vec::new();
            generate(kind, command(), &mut out).unwrap();
            let script = String::from_utf8(out).unwrap();
            assert!(
                script.contains("pqdns-example") && script.contains("zone"),
                "{kind:?}: {script}"
            );
        }
    }
}
