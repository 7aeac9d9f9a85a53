//! The dense retriever's embedder: the engine's local encoder or embeddings endpoint, fed as the
//! official `SemanticReranking` feeds its model (texts stripped first).

use codesweep_engine::EmbeddingModel;
use codesweep_tasks::retrieval::{EmbedError, Embedder};

/// An [`EmbeddingModel`] as the retrieval's [`Embedder`].
pub struct DenseEmbedder(pub EmbeddingModel);

impl Embedder for DenseEmbedder {
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let stripped: Vec<&str> = texts.iter().map(|t| t.trim()).collect();
        Ok(self.0.embed(&stripped)?)
    }
}
