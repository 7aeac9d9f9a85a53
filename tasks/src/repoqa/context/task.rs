//! Searching-Needle-Function tasks: one per needle, with its context and the prompt the
//! model gets, as the reference's `evaluate_model` assembles them.

use serde_json::{json, Value};

use super::{position_ratio, CodeContext, CommentMode, ContextBuilder, ContextError, SourceDataset, TokenCounter};
use crate::repoqa::{Language, RepoqaGrammars};

/// The reference's `TEMPLATE`: the task fields whose values, concatenated in this order
/// (one name a line), make the prompt.
pub const TEMPLATE: &str = "instruction\ncode_context\ndescription\ninstruction";

/// The reference's `INSTRUCTION`, given before the context and again after the description.
pub const INSTRUCTION: &str = "Based on the function description and code context, please retrieve and repeat the exact described function from the code context in a code block wrapped by ```:";

/// The task's `description` field: `"\nFunction Description:{description}\n"`.
pub fn task_description(description: &str) -> String {
    format!("\nFunction Description:{description}\n")
}

/// The prompt of a task, as `TEMPLATE` assembles it: instruction, code context, the
/// description field ([`task_description`]) and the instruction again. It is the user
/// message; the reference adds the model's chat template (and an optional system
/// message) around it.
pub fn snf_prompt(code_context: &str, description: &str) -> String {
    [INSTRUCTION, code_context, &task_description(description), INSTRUCTION].concat()
}

/// One task: a needle, its context and where the needle sits in it.
#[derive(Debug, Clone, PartialEq)]
pub struct SnfTask {
    /// Dataset language key.
    pub language: Language,
    /// Repository name.
    pub repo: String,
    /// Needle (function) name.
    pub name: String,
    /// The needle's file.
    pub path: String,
    /// The depth the needle was planted at: `(i + 0.5) / needles`.
    pub position_ratio: f64,
    /// The needle's description, as in the dataset.
    pub description: String,
    /// The context and the needle's token positions.
    pub context: CodeContext,
}

impl SnfTask {
    /// The reference's task id `lang::repo::name`.
    pub fn task_id(&self) -> String {
        format!("{}::{}::{}", self.language, self.repo, self.name)
    }

    /// The prompt text ([`snf_prompt`]).
    pub fn prompt(&self) -> String {
        snf_prompt(&self.context.code_context, &self.description)
    }

    /// The task as the reference writes it (and its outputs file repeats it, plus
    /// `output`): `repo, name, language, path, position_ratio, description, instruction,
    /// template, code_context, needle_token_start, needle_token_end, code_context_ntokens`.
    pub fn to_json(&self) -> Value {
        json!({
            "repo": self.repo,
            "name": self.name,
            "language": self.language.name(),
            "path": self.path,
            "position_ratio": self.position_ratio,
            "description": task_description(&self.description),
            "instruction": INSTRUCTION,
            "template": TEMPLATE,
            "code_context": self.context.code_context,
            "needle_token_start": self.context.needle_token_start,
            "needle_token_end": self.context.needle_token_end,
            "code_context_ntokens": self.context.code_context_ntokens,
        })
    }
}

/// Every task of `language` in `dataset`, in dataset order (repositories, then needles),
/// with contexts of `code_context_size` tokens counted by `tokens` and comments treated
/// as `mode` says: what a worker prompts a model with. Repositories without needles give
/// no tasks, as in the reference.
pub fn build_snf_tasks(
    dataset: &SourceDataset,
    language: Language,
    code_context_size: usize,
    mode: CommentMode,
    tokens: &dyn TokenCounter,
    grammars: &RepoqaGrammars,
) -> Result<Vec<SnfTask>, ContextError> {
    let repos = dataset.repos(language.name()).ok_or_else(|| ContextError::LanguageMissing(language.name().to_string()))?;
    let mut builder = ContextBuilder::new(language, code_context_size, mode, tokens, grammars);
    let mut tasks = Vec::new();
    for repo in repos {
        for (i, needle) in repo.needles.iter().enumerate() {
            let ratio = position_ratio(i, repo.needles.len());
            let context = builder.build(&repo.files, needle, ratio).map_err(|e| ContextError::Task {
                language: language.name().to_string(),
                repo: repo.name.clone(),
                needle: needle.name.clone(),
                source: Box::new(e),
            })?;
            tasks.push(SnfTask {
                language,
                repo: repo.name.clone(),
                name: needle.name.clone(),
                path: needle.path.clone(),
                position_ratio: ratio,
                description: needle.description.clone(),
                context,
            });
        }
    }
    Ok(tasks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_follows_the_reference_template() {
        // search_needle_function.py: `for key in task["template"].split("\n"): prompt += task[key]`.
        let prompt = snf_prompt("// Path: a.rs\nfn f() {}\n", "\n1. **Purpose**: adds.\n");
        assert_eq!(
            prompt,
            "Based on the function description and code context, please retrieve and repeat the exact described function \
             from the code context in a code block wrapped by ```:// Path: a.rs\nfn f() {}\n\nFunction Description:\n1. \
             **Purpose**: adds.\n\nBased on the function description and code context, please retrieve and repeat the exact \
             described function from the code context in a code block wrapped by ```:"
        );
        assert_eq!(TEMPLATE.split('\n').collect::<Vec<_>>(), vec!["instruction", "code_context", "description", "instruction"]);
    }
}
