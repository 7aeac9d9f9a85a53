//! Python: imports of project modules (absolute ones resolved against the repository's module
//! names, relative ones always), and the uses that only those modules can resolve.

use std::collections::HashSet;

use super::uses::{
    base_type_name, enclosing_scope, find_uses, text, walk, Binding, Bindings, Entity, ParsedFile, UseShapes,
};

/// Nodes that scope local variables and parameters.
const FUNCTIONS: &[&str] = &["function_definition", "lambda"];

const SHAPES: UseShapes = UseShapes { members: &[("attribute", "object", "attribute")], calls: &[("call", "function")] };

/// Dotted module names the repository provides.
pub struct ModuleIndex {
    modules: HashSet<String>,
}

impl ModuleIndex {
    /// Indexes `paths`: a file is importable under its dotted path from the repository root and
    /// from every folder that is not itself a package (no `__init__.py`), e.g. `src/`.
    pub fn new<'p>(paths: impl IntoIterator<Item = &'p str> + Clone) -> Self {
        let packages: HashSet<&str> = paths
            .clone()
            .into_iter()
            .filter_map(|p| p.strip_suffix("/__init__.py"))
            .collect();
        let mut modules = HashSet::new();
        for path in paths {
            let Some(stem) = path.strip_suffix(".py") else { continue };
            let stem = stem.strip_suffix("/__init__").unwrap_or(stem);
            let parts: Vec<&str> = stem.split('/').collect();
            for root in 0..parts.len() {
                if root > 0 && packages.contains(parts[..root].join("/").as_str()) {
                    continue;
                }
                let name = parts[root..].join(".");
                // Namespace packages: every prefix of an importable module is importable.
                let mut prefix = String::new();
                for part in &parts[root..] {
                    if !prefix.is_empty() {
                        prefix.push('.');
                    }
                    prefix.push_str(part);
                    modules.insert(prefix.clone());
                }
                modules.insert(name);
            }
        }
        Self { modules }
    }

    /// True when `module` names a module or package of the repository.
    pub fn contains(&self, module: &str) -> bool {
        self.modules.contains(module)
    }
}

/// Cross-file entities of every file, in file order.
pub fn find_entities(files: &[ParsedFile]) -> Vec<Vec<Entity>> {
    let index = ModuleIndex::new(files.iter().map(|f| f.path));
    files.iter().map(|file| file_entities(file, &index)).collect()
}

fn file_entities(file: &ParsedFile, index: &ModuleIndex) -> Vec<Entity> {
    let source = file.text;
    let mut bindings = Bindings::default();
    walk(&file.tree, |node| match node.kind() {
        "import_statement" => {
            let mut cursor = node.walk();
            for name in node.children_by_field_name("name", &mut cursor) {
                let (module, alias) = match name.kind() {
                    "aliased_import" => (name.child_by_field_name("name"), name.child_by_field_name("alias")),
                    _ => (Some(name), None),
                };
                let Some(module) = module else { continue };
                let module_text = text(module, source);
                if index.contains(module_text) {
                    bindings.bind(alias.map_or(module_text, |a| text(a, source)), Binding::Imported);
                }
            }
        }
        "import_from_statement" => {
            let Some(module) = node.child_by_field_name("module_name") else { return };
            let module_text = text(module, source);
            let relative = module.kind() == "relative_import";
            let mut cursor = node.walk();
            for name in node.children_by_field_name("name", &mut cursor) {
                let (imported, alias) = match name.kind() {
                    "aliased_import" => (name.child_by_field_name("name"), name.child_by_field_name("alias")),
                    _ => (Some(name), None),
                };
                let Some(imported) = imported else { continue };
                let imported_text = text(imported, source);
                let project = relative
                    || index.contains(module_text)
                    || index.contains(&format!("{module_text}.{imported_text}"));
                if project {
                    bindings.bind(alias.map_or(imported_text, |a| text(a, source)), Binding::Imported);
                }
            }
        }
        _ => {}
    });
    // Names the file defines itself shadow imports of the same name.
    walk(&file.tree, |node| {
        if matches!(node.kind(), "class_definition" | "function_definition")
            && node.parent().is_some_and(|p| p.kind() == "module")
        {
            if let Some(name) = node.child_by_field_name("name") {
                bindings.unbind(text(name, source));
            }
        }
    });
    // Instances: assigned from a call of an imported name, or annotated with an imported type;
    // plain names are local to their function, `self.x` attributes are file-wide.
    let mut instances: Vec<(String, Option<usize>)> = Vec::new();
    walk(&file.tree, |node| match node.kind() {
        "assignment" => {
            let Some(left) = node.child_by_field_name("left") else { return };
            if !matches!(left.kind(), "identifier" | "attribute") {
                return;
            }
            let from_call = node.child_by_field_name("right").is_some_and(|right| {
                right.kind() == "call"
                    && right.child_by_field_name("function").is_some_and(|callee| {
                        let callee_text = text(callee, source);
                        bindings.get(callee_text) == Some(Binding::Imported)
                            || callee.child_by_field_name("object").is_some_and(|object| {
                                bindings.get(text(object, source)) == Some(Binding::Imported)
                            })
                    })
            });
            let annotated = node
                .child_by_field_name("type")
                .is_some_and(|t| bindings.get(base_type_name(text(t, source))) == Some(Binding::Imported));
            if from_call || annotated {
                let scope = if left.kind() == "identifier" { enclosing_scope(node, FUNCTIONS) } else { None };
                instances.push((text(left, source).to_string(), scope));
            }
        }
        "typed_parameter" | "typed_default_parameter" => {
            let name = node.child_by_field_name("name").or_else(|| node.named_child(0));
            let Some(name) = name.filter(|n| n.kind() == "identifier") else { return };
            let typed = node
                .child_by_field_name("type")
                .is_some_and(|t| bindings.get(base_type_name(text(t, source))) == Some(Binding::Imported));
            if typed && text(name, source) != "self" {
                instances.push((text(name, source).to_string(), enclosing_scope(node, FUNCTIONS)));
            }
        }
        _ => {}
    });
    for (name, scope) in instances {
        bindings.bind_instance(&name, scope);
    }
    find_uses(&file.tree, source, &bindings, &SHAPES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modules_are_importable_from_roots_that_are_not_packages() {
        let index = ModuleIndex::new(["src/pkg/__init__.py", "src/pkg/util.py", "tools/run.py"]);
        assert!(index.contains("pkg.util"));
        assert!(index.contains("pkg"));
        assert!(index.contains("src.pkg.util"));
        assert!(index.contains("run"));
        assert!(!index.contains("util"), "pkg is a package: util is only pkg.util");
        assert!(!index.contains("os"));
    }
}
