//! codesweep-fetch: the files codesweep fetches for itself, so that the binary alone can do
//! its job on a fresh machine: each pinned to an immutable URL and a sha256, fetched once into
//! the cache (`$CODESWEEP_CACHE`, else `~/.cache/codesweep`), moved into place only whole and
//! verified, and with an error naming the flag or variable that points at a local copy when
//! the network is cut.

pub mod grammars;
pub mod member;
pub mod pinned;
pub mod punkt;
#[cfg(test)]
mod test_server;

pub use member::PinnedMember;
pub use pinned::{cache_dir, sha256_file, AssetError, ContentCheck, PinnedFile};
