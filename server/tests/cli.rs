//! The binary's command-line contract: one `listening on` line on stdout, graceful SIGTERM.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn prints_the_real_port_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(dir.path().join("index.html"), "<h1>demo</h1>").expect("write");
    let pkg = dir.path().join("pkg");
    std::fs::create_dir(&pkg).expect("mkdir");
    std::fs::write(pkg.join("idempotent_fetch_bg.wasm"), b"\0asm\x01\0\0\0").expect("write");
    let mut child = Command::new(env!("CARGO_BIN_EXE_idempotent-fetch-server"))
        .args(["--addr", "127.0.0.1:0", "--db"])
        .arg(dir.path().join("cli.sqlite"))
        .arg("--www")
        .arg(dir.path())
        .arg("--pkg")
        .arg(&pkg)
        .args(["--retention-secs", "60", "--sweep-interval-secs", "1", "--cors-origin", "http://127.0.0.1:5173"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn server");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).expect("read line");
    let url = line.trim().strip_prefix("listening on ").expect("listening line").to_owned();
    assert!(url.starts_with("http://127.0.0.1:") && !url.ends_with(":0"), "{url}");

    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let client = reqwest::Client::new();
        let health = client.get(format!("{url}/api/health")).send().await.expect("health");
        assert_eq!(health.status(), 200);
        let index = client.get(format!("{url}/")).send().await.expect("index");
        assert_eq!(index.text().await.expect("text"), "<h1>demo</h1>");
        let wasm = client.get(format!("{url}/pkg/idempotent_fetch_bg.wasm")).send().await.expect("wasm");
        assert_eq!(wasm.headers().get("content-type").and_then(|v| v.to_str().ok()), Some("application/wasm"));
        let preflight = client
            .request(reqwest::Method::OPTIONS, format!("{url}/api/orders"))
            .header("origin", "http://127.0.0.1:5173")
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", "idempotency-key,authorization,x-fault,content-type")
            .send()
            .await
            .expect("preflight");
        let allow = |name: &str| preflight.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
        assert_eq!(allow("access-control-allow-origin").as_deref(), Some("http://127.0.0.1:5173"));
        assert!(allow("access-control-allow-headers").is_some_and(|h| h.contains("idempotency-key")));
    });

    let pid = child.id().to_string();
    let status = Command::new("kill").args(["-TERM", &pid]).status().expect("kill");
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            assert!(status.success(), "exit status {status}");
            break;
        }
        assert!(Instant::now() < deadline, "server did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    }
}
