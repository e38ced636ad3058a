//! Standard output that a closed pipe cannot crash: `coreserve sites | head -2` ends quietly
//! with exit code 0 once `head` has read what it wants, instead of panicking in `println!`
//! ("failed printing to stdout: Broken pipe", exit code 101). Every command of [`super`]
//! prints through [`outln!`](crate::outln) and [`out!`](crate::out).

use std::io::{ErrorKind, Write};

/// Writes `args` (and a newline if `newline`) to standard output. A reader that went away
/// (`EPIPE`) ends the process at once with exit code 0: it has read what it wanted; any other
/// write error ends it with exit code 1.
pub fn write(args: std::fmt::Arguments<'_>, newline: bool) {
    let mut o = std::io::stdout().lock();
    let r = o.write_fmt(args).and_then(|()| if newline { o.write_all(b"\n") } else { Ok(()) });
    if let Err(e) = r {
        if e.kind() == ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        // stderr may be gone too: no panic there either.
        let _ = writeln!(std::io::stderr(), "error: writing to standard output: {e}");
        std::process::exit(1);
    }
}

/// `println!` that ends the process quietly (exit code 0) when standard output is a closed
/// pipe ([`write()`]).
#[macro_export]
macro_rules! outln {
    () => { $crate::cli::output::write(format_args!(""), true) };
    ($($t:tt)*) => { $crate::cli::output::write(format_args!($($t)*), true) };
}

/// `print!` with the closed-pipe handling of [`outln!`](crate::outln).
#[macro_export]
macro_rules! out {
    ($($t:tt)*) => { $crate::cli::output::write(format_args!($($t)*), false) };
}
