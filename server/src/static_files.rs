//! The static folders (`--www`, `--pkg`): tower-http's `ServeDir`, confined to its folder.
//!
//! `ServeDir` refuses `..` but follows symbolic links, so a link inside the folder (left by a build tool, or
//! planted) would serve any file the process can read. [`ConfinedDir`] resolves each request's path the way
//! `ServeDir` does, then canonicalizes it (every link resolved) and answers 404 unless the real file, and
//! the `index.html` a directory would serve, is inside the folder's own real path. Links that stay inside
//! work as before. A file swapped for a link between the check and the read could still escape: only
//! someone who can write into the folder can do that, and such a person can already change what is served.

use std::convert::Infallible;
use std::future::Future;
use std::path::{Component, Path, PathBuf};
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::Body;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use percent_encoding::percent_decode;
use tower::{Service, ServiceExt};
use tower_http::services::ServeDir;

use crate::error::ServeError;
use crate::problem::Problem;

/// `ServeDir` over `root`, serving only files whose real path is inside `root`'s real path.
#[derive(Debug, Clone)]
pub struct ConfinedDir {
    root: PathBuf,
    inner: ServeDir,
}

impl ConfinedDir {
    /// Serves `root` (resolved once now: the folder itself may be a link).
    pub fn new(root: &Path) -> Result<Self, ServeError> {
        let root = std::fs::canonicalize(root)
            .map_err(|e| ServeError::Config(format!("static folder {}: {e}", root.display())))?;
        Ok(ConfinedDir { inner: ServeDir::new(&root), root })
    }
}

impl Service<Request> for ConfinedDir {
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let (root, inner) = (self.root.clone(), self.inner.clone());
        Box::pin(async move {
            if !resolves_inside(&root, request.uri().path()).await {
                return Ok(not_found());
            }
            Ok(match inner.oneshot(request).await {
                Ok(response) => response.map(Body::new),
                Err(never) => match never {},
            })
        })
    }
}

/// Whether the file (or the directory's `index.html`) that `ServeDir` would serve for `path` is, with
/// every link resolved, inside `root`. A path that does not resolve (missing, or unreadable) is `false`:
/// `ServeDir` would answer 404 for it too.
async fn resolves_inside(root: &Path, path: &str) -> bool {
    let Some(relative) = relative_path(path) else { return false };
    let Ok(real) = tokio::fs::canonicalize(root.join(relative)).await else { return false };
    if !real.starts_with(root) {
        tracing::warn!(path, "refused: the path leads out of the static folder");
        return false;
    }
    if tokio::fs::metadata(&real).await.is_ok_and(|m| m.is_dir()) {
        match tokio::fs::canonicalize(real.join("index.html")).await {
            Ok(index) if !index.starts_with(root) => {
                tracing::warn!(path, "refused: the directory's index.html leads out of the static folder");
                return false;
            }
            // A directory without index.html: ServeDir redirects or answers 404, nothing outside.
            _ => {}
        }
    }
    true
}

/// The path below the folder that `ServeDir` serves for the URI path `path`, decoded exactly as it decodes
/// it (percent-decoding, then only plain components; `.` skipped); `None` for a path it refuses.
fn relative_path(path: &str) -> Option<PathBuf> {
    let decoded = percent_decode(path.trim_start_matches('/').as_bytes()).decode_utf8().ok()?;
    let mut relative = PathBuf::new();
    for component in Path::new(&*decoded).components() {
        match component {
            Component::Normal(part) if Path::new(part).components().all(|c| matches!(c, Component::Normal(_))) => {
                relative.push(part);
            }
            Component::CurDir => {}
            _ => return None,
        }
    }
    Some(relative)
}

fn not_found() -> Response {
    Problem::new(StatusCode::NOT_FOUND, "not-found", "Not found", "No such resource.").into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_decoded_as_serve_dir_decodes_them() {
        assert_eq!(relative_path("/a/b.txt"), Some(PathBuf::from("a/b.txt")));
        assert_eq!(relative_path("/%61/./b.txt"), Some(PathBuf::from("a/b.txt")));
        assert_eq!(relative_path("/a%2fb.txt"), Some(PathBuf::from("a/b.txt")));
        assert_eq!(relative_path("/"), Some(PathBuf::new()));
        assert_eq!(relative_path("/../etc/passwd"), None);
        assert_eq!(relative_path("/a/%2e%2e/%2e%2e/etc"), None);
        assert_eq!(relative_path("/%ff"), None);
    }
}
