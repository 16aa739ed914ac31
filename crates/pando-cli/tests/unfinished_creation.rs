//! A store whose creation failed or was cut short (issue #40, item 8), as
//! a user meets it: a creation that fails (here a file size limit fails
//! the control file's write) removes what it made; what a killed creation
//! leaves (a lock and an empty chunk, no control file) is named as such
//! by every command that opens an existing store, and `pando init` or a
//! replay then creates the store there.

use std::path::Path;

mod common;

use common::{failure, pando, run, stdout};

fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    names
}

#[cfg(target_os = "linux")]
#[test]
fn a_failed_creation_leaves_nothing_behind() {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("tiny.repr");
    stdout(&run(&["gen", "--preset", "tiny", "-o", trace.to_str().unwrap()]));
    let absent = dir.path().join("absent");
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    for store in [&absent, &empty] {
        let mut command = pando();
        command.args(["replay", trace.to_str().unwrap(), "--report", dir.path().join("report").to_str().unwrap()]);
        command.env("PANDO_STORE", store);
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            command.pre_exec(|| {
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
                // Smaller than a control slot (4 KiB): its write fails.
                let limit = libc::rlimit { rlim_cur: 1024, rlim_max: 1024 };
                if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let stderr = failure(&command.output().unwrap());
        assert!(stderr.contains("File too large") && stderr.contains("control.tmp"), "{stderr}");
    }
    // The directory the creation made is gone; the one it found is empty.
    assert!(!absent.exists());
    assert_eq!(listing(&empty), Vec::<String>::new());
    for store in [&absent, &empty] {
        let output = pando().arg("info").env("PANDO_STORE", store).output().unwrap();
        assert!(!failure(&output).contains("control file"));
        assert!(stdout(&run(&["init", store.to_str().unwrap()])).contains("created an empty store"));
    }
}

#[test]
fn the_leftovers_of_a_killed_creation_are_named_then_cleared() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    std::fs::create_dir(&store).unwrap();
    std::fs::write(store.join("lock"), "").unwrap();
    std::fs::write(store.join("chunk-0000000000000000.pack"), "").unwrap();
    for args in [&["info"][..], &["log"], &["stats"], &["check"], &["gc", "--keep-last", "5"]] {
        let output = pando().args(args).env("PANDO_STORE", &store).output().unwrap();
        let stderr = failure(&output);
        assert!(stderr.contains("holds the files of a store whose creation did not finish"), "{args:?}: {stderr}");
        assert!(stderr.contains("`pando init`") && !stderr.contains("not a pando store"), "{args:?}: {stderr}");
        assert_eq!(listing(&store), ["chunk-0000000000000000.pack", "lock"], "{args:?} changed the directory");
    }
    assert!(stdout(&run(&["init", store.to_str().unwrap()])).contains("created an empty store"));
    let info = pando().arg("info").env("PANDO_STORE", &store).output().unwrap();
    assert!(stdout(&info).contains("commits:      0"));

    // A replay creates its store over them too.
    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("lock"), "").unwrap();
    let report = dir.path().join("report");
    let output = pando()
        .args(["replay", "--preset", "tiny", "--blocks", "5", "--report", report.to_str().unwrap()])
        .env("PANDO_STORE", &other)
        .output()
        .unwrap();
    stdout(&output);
    let info = pando().arg("info").env("PANDO_STORE", &other).output().unwrap();
    assert!(stdout(&info).contains("commits:      5"));
}
