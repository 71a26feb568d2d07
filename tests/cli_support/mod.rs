//! Running the `ferry` binary as a user would, from the project root (where `examples/` is), for CLI tests.
#![allow(dead_code)]

use std::process::{Command, Output};

pub fn ferry(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("FERRY_LOG", "warn")
        .output()
        .expect("run ferry")
}
