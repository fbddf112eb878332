//! The static folders (`--www`, `--pkg`) serve what is inside them and nothing else: a symbolic link that
//! leads outside the folder is 404, whatever the spelling of the path; links that stay inside still work.
#![cfg(unix)]

mod common;

use std::os::unix::fs::symlink;
use std::path::Path;

use common::TestServer;

const SECRET: &str = "top secret, outside the served folders";

/// `root/{index.html, inside.txt}`, links that stay inside, and links that lead to `outside`.
fn folder(root: &Path, outside: &Path) {
    std::fs::create_dir_all(root.join("sub")).expect("mkdir");
    std::fs::create_dir_all(root.join("deep")).expect("mkdir");
    std::fs::write(root.join("index.html"), "<h1>index</h1>").expect("write");
    std::fs::write(root.join("inside.txt"), "inside").expect("write");
    symlink("inside.txt", root.join("alias.txt")).expect("link inside");
    symlink(root.join("sub"), root.join("subalias")).expect("link inside");
    std::fs::write(root.join("sub").join("page.txt"), "page").expect("write");
    symlink(outside.join("secret.txt"), root.join("leak.txt")).expect("link out");
    symlink("../outside/secret.txt", root.join("relative-leak.txt")).expect("link out");
    symlink(outside, root.join("out")).expect("link out");
    symlink(outside.join("secret.txt"), root.join("deep").join("index.html")).expect("link out");
}

#[tokio::test]
async fn links_out_of_the_served_folders_are_404_and_links_inside_work() {
    let dir = tempfile::tempdir().expect("dir");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&outside).expect("mkdir");
    std::fs::write(outside.join("secret.txt"), SECRET).expect("write");
    let (www, pkg) = (dir.path().join("www"), dir.path().join("pkg"));
    folder(&www, &outside);
    folder(&pkg, &outside);
    // The relative links above name `../outside`, which is a sibling of www and pkg.
    let t = TestServer::start_with(|config| {
        config.www = Some(www.clone());
        config.pkg = Some(pkg.clone());
    })
    .await;

    for prefix in ["", "/pkg"] {
        for (path, body) in [
            ("/inside.txt", "inside"),
            ("/alias.txt", "inside"),
            ("/subalias/page.txt", "page"),
            ("/sub/page.txt", "page"),
            ("/", "<h1>index</h1>"),
        ] {
            let url = t.url(&format!("{prefix}{path}"));
            let response = t.client.get(&url).send().await.expect("get");
            assert_eq!(response.status(), 200, "{url}");
            assert_eq!(response.text().await.expect("body"), body, "{url}");
        }
        for path in [
            "/leak.txt",
            "/relative-leak.txt",
            "/out/secret.txt",
            "/deep/",
            "/%6ceak.txt",
            "/out%2fsecret.txt",
            "/./out/secret.txt",
            "/sub/../leak.txt",
        ] {
            let url = t.url(&format!("{prefix}{path}"));
            let response = t.client.get(&url).send().await.expect("get");
            let status = response.status();
            let text = response.text().await.expect("body");
            assert!(!text.contains(SECRET), "{url} served the file outside: {status}");
            assert_eq!(status, 404, "{url}");
        }
    }
    t.stop().await;
}
