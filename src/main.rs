//! The `capstan` command line.

mod cli;

fn main() -> std::process::ExitCode {
    capstan::memory::keep_freed_memory_returned();
    cli::main()
}
