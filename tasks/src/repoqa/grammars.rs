//! Which tree-sitter grammars RepoQA scoring parses with.
//!
//! The official scorer parses with the grammars bundled in PyPI `tree-sitter-languages`
//! 1.10.2 (tree-sitter 0.20-era grammars). Newer grammars recover from syntax errors
//! differently, which changes `--ignore-comments` results on answers that mix prose and
//! code. [`RepoqaGrammars::load_reference`] loads that wheel's `languages.so` so the numbers
//! are the official ones; [`RepoqaGrammars::Bundled`] uses the grammars compiled into
//! codesweep (equal on every golden vector except one such answer).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tree_sitter_language::LanguageFn;

use super::Language;

/// The grammar set for RepoQA parsing.
#[derive(Clone)]
pub enum RepoqaGrammars {
    /// Grammars compiled into codesweep (tree-sitter-python 0.25, -cpp/-java/-typescript/-rust 0.23).
    Bundled,
    /// The official scorer's grammar binaries, loaded from a `languages.so`.
    Reference(Arc<ReferenceGrammars>),
}

/// Grammars loaded from tree-sitter-languages' `languages.so`.
pub struct ReferenceGrammars {
    path: PathBuf,
    /// One grammar per language, in `Language::ALL` order.
    languages: Vec<tree_sitter::Language>,
    // Keeps the shared library mapped for as long as the grammars are used.
    _library: libloading::Library,
}

/// Why the reference grammars could not be used.
#[derive(Debug, thiserror::Error)]
pub enum GrammarError {
    /// The library could not be opened.
    #[error("cannot load grammar library {path}: {source}; give the path of tree-sitter-languages 1.10.2's languages.so, or `official` to fetch it")]
    Open {
        /// The library path.
        path: PathBuf,
        /// The loader's error.
        source: libloading::Error,
    },
    /// The official grammars could not be fetched.
    #[error("the official RepoQA grammars are needed: {message}")]
    Fetch {
        /// Why, and how to supply them by hand.
        message: String,
    },
    /// A language's entry point is missing.
    #[error("{path} has no `{symbol}`; is it tree-sitter-languages' languages.so?")]
    MissingLanguage {
        /// The library path.
        path: PathBuf,
        /// The missing symbol.
        symbol: String,
    },
    /// The grammar's ABI is outside what the linked tree-sitter runtime reads.
    #[error("{path}: the {language} grammar has ABI version {abi}, this tree-sitter reads {min}..={max}")]
    Abi {
        /// The library path.
        path: PathBuf,
        /// The language.
        language: Language,
        /// The grammar's ABI version.
        abi: usize,
        /// Lowest readable ABI.
        min: usize,
        /// Highest readable ABI.
        max: usize,
    },
}

impl RepoqaGrammars {
    /// Picks grammars by name without touching the network: `auto` (the official scorer's
    /// binaries when already at [`RepoqaGrammars::default_reference_path`], else the bundled
    /// ones), `bundled`, or a path to a `languages.so`. codesweep-fetch's `choose_grammars`
    /// fetches the official binaries for `auto` and `official`.
    pub fn choose(choice: &str) -> Result<Self, GrammarError> {
        match choice {
            "bundled" => Ok(Self::Bundled),
            "auto" => match Self::default_reference_path().filter(|p| p.is_file()) {
                Some(path) => Self::load_reference(&path),
                None => Ok(Self::Bundled),
            },
            path => Self::load_reference(Path::new(path)),
        }
    }

    /// Loads the reference grammars from a tree-sitter-languages `languages.so`.
    pub fn load_reference(path: &Path) -> Result<Self, GrammarError> {
        // SAFETY: loading runs the library's initialisers; tree-sitter-languages' library is
        // plain C/C++ grammar code with no initialisers of consequence.
        let library = unsafe { libloading::Library::new(path) }
            .map_err(|source| GrammarError::Open { path: path.to_path_buf(), source })?;
        let mut languages = Vec::new();
        for language in Language::ALL {
            let symbol = format!("tree_sitter_{}", language.name());
            // SAFETY: tree-sitter grammar entry points have this signature and return a
            // pointer to a static TSLanguage that lives as long as the library.
            let grammar = unsafe {
                let entry: libloading::Symbol<unsafe extern "C" fn() -> *const ()> = library
                    .get(symbol.as_bytes())
                    .map_err(|_| GrammarError::MissingLanguage { path: path.to_path_buf(), symbol: symbol.clone() })?;
                tree_sitter::Language::new(LanguageFn::from_raw(*entry))
            };
            let abi = grammar.abi_version();
            let (min, max) = (tree_sitter::MIN_COMPATIBLE_LANGUAGE_VERSION, tree_sitter::LANGUAGE_VERSION);
            if !(min..=max).contains(&abi) {
                return Err(GrammarError::Abi { path: path.to_path_buf(), language, abi, min, max });
            }
            languages.push(grammar);
        }
        Ok(Self::Reference(Arc::new(ReferenceGrammars { path: path.to_path_buf(), languages, _library: library })))
    }

    /// Where the official `languages.so` is kept: `$CODESWEEP_GRAMMARS_DIR`, else
    /// `$CODESWEEP_CACHE/grammars`, else `~/.cache/codesweep/grammars`, then
    /// `tree-sitter-languages-1.10.2/languages.so`.
    pub fn default_reference_path() -> Option<PathBuf> {
        let set = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        let base = set("CODESWEEP_GRAMMARS_DIR")
            .or_else(|| set("CODESWEEP_CACHE").map(|cache| cache.join("grammars")))
            .or_else(|| set("HOME").map(|home| home.join(".cache/codesweep/grammars")))?;
        Some(base.join("tree-sitter-languages-1.10.2/languages.so"))
    }

    /// The grammar for `language`.
    pub fn grammar(&self, language: Language) -> tree_sitter::Language {
        match self {
            Self::Bundled => match language {
                Language::Python => tree_sitter_python::LANGUAGE.into(),
                Language::Cpp => tree_sitter_cpp::LANGUAGE.into(),
                Language::Java => tree_sitter_java::LANGUAGE.into(),
                Language::TypeScript => tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
                Language::Rust => tree_sitter_rust::LANGUAGE.into(),
            },
            // `load_reference` loads every language of `Language::ALL`, in that order.
            Self::Reference(reference) => reference.languages[language as usize].clone(),
        }
    }

    /// Says which grammars these are, for reports.
    pub fn describe(&self) -> String {
        match self {
            Self::Bundled => "bundled grammars (tree-sitter-python 0.25, cpp/java/typescript/rust 0.23)".into(),
            Self::Reference(reference) => format!("reference grammars from {}", reference.path.display()),
        }
    }
}
