//! The committed XDP object `bpf/dns_redirect.o` is what `llc-14` makes of its source
//! `bpf/dns_redirect.ll` with the command written in that source, so the two cannot drift
//! apart. Skipped, with a message saying so, where LLVM 14's `llc` is not installed (the
//! crate builds from the committed object without it).

use std::path::Path;
use std::process::Command;

/// `llc-14`, or `llc` if that is LLVM 14.
fn llc14() -> Option<&'static str> {
    ["llc-14", "llc"].into_iter().find(|llc| {
        Command::new(llc)
            .arg("--version")
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("LLVM version 14."))
    })
}

#[test]
fn the_committed_object_is_built_from_its_source() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("bpf");
    let source = std::fs::read_to_string(dir.join("dns_redirect.ll")).unwrap();
    // The command the source documents is the one run here.
    let command =
        "llc-14 -march=bpfel -mcpu=v2 -O2 -filetype=obj dns_redirect.ll -o dns_redirect.o";
    assert!(
        source.contains(command),
        "the source no longer documents {command:?}"
    );
    let Some(llc) = llc14() else {
        eprintln!("SKIPPED: LLVM 14's llc is not installed; bpf/dns_redirect.o was not rebuilt from its source");
        return;
    };
    let out = tempfile::tempdir().unwrap();
    let object = out.path().join("dns_redirect.o");
    let status = Command::new(llc)
        .args([
            "-march=bpfel",
            "-mcpu=v2",
            "-O2",
            "-filetype=obj",
            "dns_redirect.ll",
            "-o",
        ])
        .arg(&object)
        .current_dir(&dir)
        .status()
        .unwrap();
    assert!(status.success(), "{llc} failed on dns_redirect.ll");
    let built = std::fs::read(&object).unwrap();
    let committed = std::fs::read(dir.join("dns_redirect.o")).unwrap();
    assert!(
        built == committed,
        "bpf/dns_redirect.o differs from what {llc} makes of dns_redirect.ll: run `{command}` in {}",
        dir.display()
    );
}
