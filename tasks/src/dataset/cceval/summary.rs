//! The built set's Table 1 as people and scripts read it: a Markdown table and a JSON object.

use serde_json::{json, Value};

use super::Summary;
use crate::cceval::Language;

impl Summary {
    /// Table 1 of the paper for this set, then what each filter dropped.
    pub fn table(&self, language: Language) -> String {
        let d = &self.dropped;
        format!(
            "CrossCodeEval {language} dataset\n\
             | # repositories | # files | # examples | avg prompt lines | avg prompt tokens | avg reference tokens |\n\
             |---:|---:|---:|---:|---:|---:|\n\
             | {} | {} | {} | {:.1} | {:.1} | {:.1} |\n\
             cross-file names (first use per file): {}; dropped: no statement end {}, short prompt {}, \
             reference length {}, found in another file {}, duplicate {}, solved by the filter model {}\n",
            self.repositories,
            self.files,
            self.examples,
            self.avg_prompt_lines,
            self.avg_prompt_tokens,
            self.avg_reference_tokens,
            self.candidates,
            d.no_statement_end,
            d.short_prompt,
            d.reference_length,
            d.found_in_other_file,
            d.duplicate,
            d.model_exact_match,
        )
    }

    /// Every figure as JSON, with the language and the seconds the build took.
    pub fn to_json(&self, language: Language, build_seconds: f64) -> Value {
        let d = &self.dropped;
        json!({
            "language": language.name(),
            "repositories": self.repositories,
            "files_read": self.files_read,
            "files": self.files,
            "examples": self.examples,
            "candidates": self.candidates,
            "avg_prompt_lines": self.avg_prompt_lines,
            "avg_prompt_tokens": self.avg_prompt_tokens,
            "avg_reference_tokens": self.avg_reference_tokens,
            "dropped": {
                "no_statement_end": d.no_statement_end,
                "short_prompt": d.short_prompt,
                "reference_length": d.reference_length,
                "found_in_other_file": d.found_in_other_file,
                "duplicate": d.duplicate,
                "model_exact_match": d.model_exact_match,
            },
            "build_seconds": build_seconds,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_and_the_json_carry_the_same_figures() {
        let mut summary = Summary { repositories: 2, files: 7, examples: 31, avg_prompt_lines: 40.31, ..Summary::default() };
        summary.dropped.duplicate = 3;
        let table = summary.table(Language::Python);
        assert!(table.contains("| 2 | 7 | 31 | 40.3 |"), "{table}");
        assert!(table.contains("duplicate 3,"), "{table}");
        let json = summary.to_json(Language::Python, 1.5);
        assert_eq!((json["examples"].as_u64(), json["dropped"]["duplicate"].as_u64()), (Some(31), Some(3)));
        assert_eq!((json["language"].as_str(), json["build_seconds"].as_f64()), (Some("python"), Some(1.5)));
    }
}
