//! Talking with the person at the terminal: progress lines and typed confirmations.

use crate::error::CliError;

/// Prints `now` for `name` when it differs from what was printed `last` (the progress lines
/// of `--wait`).
pub fn say_if_changed(last: &mut String, name: &str, now: String) {
    if now != *last {
        println!("{name}: {now}");
        *last = now;
    }
}

/// Asks the person at the terminal to confirm by typing `expected` after `prompt`; off a
/// terminal, refuses with `off_terminal` (which says to add --yes).
pub fn confirm_by_typing(prompt: &str, expected: &str, off_terminal: &str) -> Result<(), CliError> {
    use std::io::{BufRead, IsTerminal, Write as _};
    if !std::io::stdin().is_terminal() {
        return Err(CliError::Refused(off_terminal.to_owned()));
    }
    print!("{prompt}");
    let _ = std::io::stdout().flush();
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(|e| CliError::Refused(format!("cannot read the confirmation: {e}")))?;
    if answer.trim() != expected {
        return Err(CliError::Refused(format!(
            "not confirmed ({:?} is not {expected}); nothing changed",
            answer.trim()
        )));
    }
    Ok(())
}
