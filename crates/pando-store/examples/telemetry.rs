//! A node's view of pando: logs on standard error (`tracing-subscriber`,
//! filtered by `RUST_LOG`, `info` by default) and metrics in Prometheus's
//! text format on `http://ADDR/metrics` (`metrics-exporter-prometheus`),
//! while blocks are committed and a collection keeps the last 20 commits
//! every 50 blocks.
//!
//! `cargo run --release -p pando-store --example telemetry -- [ADDR] [BLOCKS] [DIR]`
//! (defaults: `127.0.0.1:9184`, 300 blocks, a temporary directory). It then
//! fetches its own page once and prints it, and keeps serving until
//! Ctrl-C if `PANDO_SERVE=1`. Point Prometheus at it with a scrape job of
//! `targets: ["127.0.0.1:9184"]`.

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use pando_store::{CommitMeta, Options, Store};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};

/// Serves `GET /metrics` (any other path: 404) from a thread of its own:
/// the page is rendered at each request.
fn serve(listener: TcpListener, handle: PrometheusHandle) {
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut request_line = String::new();
            if BufReader::new(&stream).read_line(&mut request_line).is_err() {
                continue;
            }
            let (status, body) = if request_line.starts_with("GET /metrics ") {
                ("200 OK", handle.render())
            } else {
                ("404 Not Found", "not found: the page is /metrics\n".to_string())
            };
            let mut stream = stream;
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
}

/// What a scraper gets from `addr`.
fn scrape(addr: &str) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(addr)?;
    write!(stream, "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    Ok(response.split_once("\r\n\r\n").map(|(_, body)| body.to_string()).unwrap_or(response))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let addr = args.get(1).cloned().unwrap_or_else(|| "127.0.0.1:9184".into());
    let blocks: u32 = args.get(2).map(|s| s.parse()).transpose()?.unwrap_or(300);
    let scratch = tempfile::tempdir()?;
    let dir = args.get(3).map_or_else(|| scratch.path().to_path_buf(), std::path::PathBuf::from);

    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr)
        .init();
    let handle = PrometheusBuilder::new().install_recorder()?;
    serve(TcpListener::bind(&addr)?, handle);

    let store = Store::open(&dir, Options::default())?;
    let mut tree = store.empty_tree();
    let mut parent = Vec::new();
    for block in 0..blocks {
        for i in 0..200u32 {
            let account = format!("tz1{:06}", (i * 7919 + block * 31) % 20_000);
            tree.add_mut(&["contracts", "index", account.as_str(), "balance"], &(block * i).to_le_bytes())?;
        }
        let hash = store.commit(
            &tree,
            CommitMeta {
                parents: &parent,
                date: 1_600_000_000 + i64::from(block) * 30,
                author: "Tezos",
                message: &format!("block {block}"),
            },
        )?;
        parent = vec![hash];
        tree = store.checkout(&hash)?.expect("just committed");
        if block % 50 == 49 {
            store.gc(&store.ancestor(&hash, 20)?)?;
        }
    }
    store.wait_gc()?;

    let page = scrape(&addr)?;
    println!("{page}");
    if std::env::var("PANDO_SERVE").is_ok_and(|v| v == "1") {
        eprintln!("serving http://{addr}/metrics until Ctrl-C");
        std::thread::park();
    }
    Ok(())
}
