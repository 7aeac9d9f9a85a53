//! The tree-sitter grammars the official RepoQA scorer parses with: `languages.so` of PyPI
//! `tree-sitter-languages` 1.10.2, fetched from its wheel for this machine's architecture.
//! `auto` falls back to codesweep's bundled grammars (with a warning) when they cannot be had.

use std::path::PathBuf;
use std::sync::OnceLock;

use codesweep_tasks::repoqa::grammars::GrammarError;
use codesweep_tasks::repoqa::RepoqaGrammars;

use crate::pinned::{cache_dir, AssetError, PinnedFile};
use crate::PinnedMember;

/// The wheel and `languages.so` pins for this architecture: (wheel URL, wheel sha256, library sha256).
fn pins() -> Option<(&'static str, &'static str, &'static str)> {
    match std::env::consts::ARCH {
        "x86_64" => Some((
            "https://files.pythonhosted.org/packages/96/81/ab4eda8dbd3f736fcc9a508bc69232d3b9076cd46b932d9bf9d49b9a1ec9/tree_sitter_languages-1.10.2-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
            "9ae34ac314a7170be24998a0f994c1ac80761d8d4bd126af27ee53a023d3b849",
            "859c2802113d4d65c2ab38d6aa30db98880f4b2ee71d8289690c3e1e26e368d2",
        )),
        "aarch64" => Some((
            "https://files.pythonhosted.org/packages/ba/a2/e8272617901f896ae36459ed2a2ff06d9b1ff5e6157d034c5e2c9885c741/tree_sitter_languages-1.10.2-cp311-cp311-manylinux_2_17_aarch64.manylinux2014_aarch64.whl",
            "6f370cd7845c6c81df05680d5bd96db8a99d32b56f4728c5d05978911130a853",
            "2d0e8ec8be4f47e675abeadf7d3ad397a847d6d394f0cd97a18145704833e5c6",
        )),
        _ => None,
    }
}

const OFFLINE_HINT: &str = "Without a network, pass a languages.so path as the grammars choice (`--grammars PATH`, \
                            `[repoqa] grammars`), or put it at $CODESWEEP_GRAMMARS_DIR/tree-sitter-languages-1.10.2/languages.so; \
                            `bundled` uses codesweep's own grammars, which differ from the official ones on \
                            error-recovered code with ignore_comments";

/// Where the library is kept ([`RepoqaGrammars::default_reference_path`], else under the
/// cache folder).
pub fn reference_path() -> PathBuf {
    RepoqaGrammars::default_reference_path()
        .unwrap_or_else(|| cache_dir().join("grammars/tree-sitter-languages-1.10.2/languages.so"))
}

/// The official grammar library, fetched into [`reference_path`] when missing or altered.
pub fn ensure_reference() -> Result<PathBuf, AssetError> {
    let path = reference_path();
    let Some((url, wheel_sha, library_sha)) = pins() else {
        return Err(AssetError::Fetch {
            what: "the official RepoQA grammars".into(),
            url: "PyPI tree-sitter-languages 1.10.2".into(),
            message: format!("it has no wheel for {}", std::env::consts::ARCH),
            hint: OFFLINE_HINT.into(),
        });
    };
    let folder = path.parent().map(PathBuf::from).unwrap_or_default();
    PinnedMember {
        archive: PinnedFile {
            what: "the official RepoQA grammars (PyPI tree-sitter-languages 1.10.2)".into(),
            url: url.into(),
            sha256: Some(wheel_sha.into()),
            content_check: None,
            path: folder.join("tree-sitter-languages-1.10.2.whl"),
            offline_hint: OFFLINE_HINT.into(),
        },
        member: "tree_sitter_languages/languages.so".into(),
        sha256: library_sha.into(),
        path,
    }
    .ensure()
}

/// The official library, checked once per process: a verified copy is not hashed again for
/// every shard. A failure is not remembered, so `official` tries again next time.
fn reference_once() -> Result<&'static PathBuf, AssetError> {
    static FETCHED: OnceLock<PathBuf> = OnceLock::new();
    if let Some(path) = FETCHED.get() {
        return Ok(path);
    }
    let path = ensure_reference()?;
    Ok(FETCHED.get_or_init(|| path))
}

/// Picks RepoQA grammars by name, as [`RepoqaGrammars::choose`] does, except that `auto`
/// fetches the official library when it is missing and falls back to the bundled grammars,
/// saying why on stderr once, when it cannot be had; `official` fetches or fails.
pub fn choose_grammars(choice: &str) -> Result<RepoqaGrammars, GrammarError> {
    match choice {
        "auto" => {
            // Decided once: a machine without the network does not try again for every shard.
            static AUTO: OnceLock<Option<&'static PathBuf>> = OnceLock::new();
            let path = AUTO.get_or_init(|| reference_once().inspect_err(|e| eprintln!("warning: using the bundled RepoQA grammars: {e}")).ok());
            match path {
                Some(path) => RepoqaGrammars::load_reference(path),
                None => Ok(RepoqaGrammars::Bundled),
            }
        }
        "official" => {
            let path = reference_once().map_err(|e| GrammarError::Fetch { message: e.to_string() })?;
            RepoqaGrammars::load_reference(path)
        }
        other => RepoqaGrammars::choose(other),
    }
}
