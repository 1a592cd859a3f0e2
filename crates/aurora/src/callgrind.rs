//! Counting instructions: this program run again under valgrind's
//! callgrind with other arguments, and the total it counted. Benchmarks
//! use it for per-cell and per-packet costs that do not depend on the
//! machine's load (two runs of different lengths, the difference divided
//! by the difference in work, so start-up cancels).

use std::process::Command;

/// Instructions callgrind counts while this program runs with `args`.
pub fn instructions(args: &[&str]) -> Result<u64, String> {
    let me = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let out = std::env::temp_dir().join(format!("aurora-callgrind-{}.cg", std::process::id()));
    let o = Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(&me)
        .args(args)
        .output()
        .map_err(|e| format!("cannot run valgrind ({e}); apt-get install valgrind"))?;
    if !o.status.success() {
        return Err(format!(
            "valgrind failed: {}",
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .last()
                .unwrap_or("")
        ));
    }
    let text = std::fs::read_to_string(&out).map_err(|e| format!("no callgrind output: {e}"))?;
    let _ = std::fs::remove_file(&out);
    text.lines()
        .find_map(|l| {
            l.strip_prefix("summary:")
                .or_else(|| l.strip_prefix("totals:"))
        })
        .and_then(|t| t.split_whitespace().next()?.parse().ok())
        .ok_or_else(|| "callgrind wrote no total".to_string())
}
