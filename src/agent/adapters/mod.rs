//! The four adapters: three tools with their own JSON output, and `command`,
//! any argv speaking closer's contract.

pub mod claude_code;
pub mod codex;
pub mod command;
pub mod opencode;
