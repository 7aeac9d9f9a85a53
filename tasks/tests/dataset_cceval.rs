//! `dataset::cceval` on small repositories written here, one per language (several files that
//! import each other): which cross-file names become examples, how each example is split, the
//! line numbers, what every filter removes, and that the records round-trip through the scorer.

use std::collections::BTreeSet;

use codesweep_tasks::cceval::{CcevalScorer, EditSimBackend, Example, Language};
use codesweep_tasks::dataset::cceval::{build, Dataset, DatasetExample, Options, Repository};
use codesweep_tasks::retrieval::chunks::ProjectFile;

fn repository(name: &str, files: &[(&str, String)]) -> Repository {
    Repository {
        name: name.to_string(),
        files: files.iter().map(|(path, content)| ProjectFile { path: path.to_string(), content: content.clone() }).collect(),
    }
}

/// `n` lines of code that use nothing from other files.
fn filler(language: Language, n: usize, indent: &str) -> String {
    (0..n)
        .map(|i| match language {
            Language::Python => format!("{indent}local_{i} = {i}\n"),
            Language::TypeScript => format!("{indent}const local{i} = {i};\n"),
            Language::Java | Language::CSharp => format!("{indent}int local{i} = {i};\n"),
        })
        .collect()
}

fn entities_of(dataset: &Dataset, file: &str) -> BTreeSet<String> {
    dataset.examples.iter().filter(|e| e.file == file).map(|e| e.entity.clone()).collect()
}

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// Checks what holds for every example: the three parts are the file, the cursor line holds
/// the entity, line numbers match the text, and scoring the groundtruth as the prediction
/// gives an exact match.
fn check_examples(dataset: &Dataset, repositories: &[Repository], language: Language) {
    let mut scorer = CcevalScorer::new(language, EditSimBackend::Difflib);
    for (n, example) in dataset.examples.iter().enumerate() {
        assert_eq!(example.task_id, format!("project_cc_{}/{n}", language.name()));
        let content = &repositories
            .iter()
            .find(|r| r.name == example.repository)
            .and_then(|r| r.files.iter().find(|f| f.path == example.file))
            .expect("example names a file of its repository")
            .content;
        assert_eq!(&format!("{}{}{}", example.prompt, example.groundtruth, example.right_context), content);
        assert!(example.groundtruth.contains(&example.entity), "{example:?}");
        let cursor_line_end = example.groundtruth.find('\n').unwrap_or(example.groundtruth.len());
        assert!(example.groundtruth[..cursor_line_end].contains(&example.entity), "entity on the cursor line: {example:?}");
        let json = example.to_json();
        let metadata = &json["metadata"];
        let line = content[..example.prompt.len()].matches('\n').count();
        assert_eq!(metadata["groundtruth_start_lineno"], line);
        assert_eq!(metadata["right_context_start_lineno"], line + example.groundtruth.matches('\n').count() + 1);
        assert_eq!(metadata["context_start_lineno"], 0);
        assert_eq!(metadata["file"], example.file.as_str());
        let decoded = Example::from_json(&json).expect("official record");
        let scored = scorer.score(&decoded.task_id, &decoded.prompt, &decoded.groundtruth, &decoded.groundtruth);
        assert!(scored.em, "groundtruth scored against itself: {example:?}");
        match language {
            Language::Python => assert!(example.right_context.starts_with('\n'), "{example:?}"),
            Language::Java | Language::CSharp => {
                assert!(example.groundtruth.ends_with([';', '{', '}']), "{example:?}")
            }
            Language::TypeScript => assert!(
                example.groundtruth.ends_with([';', '{', '}']) || example.right_context.starts_with('\n'),
                "{example:?}"
            ),
        }
    }
}

fn python_repository() -> Repository {
    let shapes = "class Circle:\n    def __init__(self, r):\n        self.r = r\n\n    def area(self):\n        return self.r\n\n    @classmethod\n    def from_diameter(cls, d):\n        return cls(d / 2)\n\n\ndef make_unit(n=1):\n    return Circle(n)\n".to_string();
    let main = format!(
        "import os\nfrom pkg.shapes import Circle, make_unit\nfrom . import shapes\n\nearly = shapes.early_name()\n{}\n\ndef run(path):\n    c = Circle(2)\n    total = c.area() + 1\n    unit = make_unit(5)\n    again = c.area() * 2\n    base = os.path.join(path, \"x\")\n    d = Circle.from_diameter(4)\n    wide = shapes.widest({})\n    spread = make_unit().grow(\n        3)\n    return shapes.make_unit()\n",
        filler(Language::Python, 12, ""),
        (0..40).map(|i| i.to_string()).collect::<Vec<_>>().join(", ")
    );
    let other = "    d = Circle.from_diameter(4)\n".to_string();
    repository(
        "pyrepo",
        &[("pkg/__init__.py", String::new()), ("pkg/shapes.py", shapes), ("pkg/main.py", main), ("pkg/other.py", other)],
    )
}

#[test]
fn python_examples_and_filters() {
    let repositories = [python_repository()];
    let dataset = build(&repositories, Options { language: Language::Python, seed: 7 }).unwrap();
    check_examples(&dataset, &repositories, Language::Python);
    // Circle is called (an imported class), area is used on an instance made from it, make_unit
    // is an imported function; `grow` of `make_unit()` is not resolved (the receiver is a call).
    assert_eq!(entities_of(&dataset, "pkg/main.py"), names(&["Circle", "area", "make_unit"]));
    let d = &dataset.summary.dropped;
    assert_eq!(d.short_prompt, 1, "early_name is in the first lines");
    assert_eq!(d.reference_length, 1, "widest has 81 tokens");
    assert_eq!(d.found_in_other_file, 1, "from_diameter's line is also in pkg/other.py");
    // First use per name: early_name, Circle, area, make_unit, from_diameter, widest (the later
    // `shapes.make_unit()` repeats make_unit; `again = c.area()` repeats area).
    assert_eq!(dataset.summary.candidates, 6);
    assert_eq!(dataset.summary.examples, 3);
    // The first-use rule: `area` comes from line `total = c.area() + 1`, not the later `again` line.
    let area = dataset.examples.iter().find(|e| e.entity == "area").unwrap();
    assert!(area.groundtruth.ends_with("c.area() + 1") || area.groundtruth.ends_with("area() + 1"), "{area:?}");
    let main = &repositories[0].files[2].content;
    let area_line = main.lines().position(|l| l.contains("total = c.area()")).unwrap();
    assert_eq!(area.to_json()["metadata"]["groundtruth_start_lineno"], area_line);
}

#[test]
fn python_statement_runs_over_lines_until_it_parses() {
    let shapes = "def make_unit():\n    return 1\n".to_string();
    let main = format!(
        "from shapes import make_unit\n{}\nspread = make_unit(\n    3, 4)\nafter = 1\n",
        filler(Language::Python, 10, "")
    );
    let repositories = [repository("multi", &[("shapes.py", shapes), ("main.py", main)])];
    let dataset = build(&repositories, Options { language: Language::Python, seed: 1 }).unwrap();
    check_examples(&dataset, &repositories, Language::Python);
    let example = &dataset.examples[0];
    assert!(example.groundtruth.ends_with("make_unit(\n    3, 4)"), "{example:?}");
    // Line 0 the import, 1-10 filler, 11 blank, 12-13 the statement.
    assert_eq!(example.to_json()["metadata"]["groundtruth_start_lineno"], 12);
    assert_eq!(example.to_json()["metadata"]["right_context_start_lineno"], 14);
    assert_eq!(example.right_context, "\nafter = 1\n");
}

#[test]
fn cursor_is_seeded_and_on_a_token_start() {
    let repositories = [python_repository()];
    let options = Options { language: Language::Python, seed: 7 };
    let first = build(&repositories, options).unwrap();
    let again = build(&repositories, options).unwrap();
    assert_eq!(first.examples, again.examples, "same seed, same examples");
    let mut cursors = BTreeSet::new();
    for seed in 0..40 {
        let dataset = build(&repositories, Options { language: Language::Python, seed }).unwrap();
        let area: &DatasetExample = dataset.examples.iter().find(|e| e.entity == "area").unwrap();
        // Tokens of `    total = c.area() + 1` at or before `area`: total = c . area
        let line_start = area.prompt.rfind('\n').unwrap() + 1;
        cursors.insert(area.prompt[line_start..].to_string());
    }
    let expected: BTreeSet<String> =
        ["    ", "    total ", "    total = ", "    total = c", "    total = c."].iter().map(|s| s.to_string()).collect();
    assert_eq!(cursors, expected, "every token before the entity, and only those, is a cursor");
}

#[test]
fn duplicate_references_across_repositories_are_dropped() {
    let repositories = [python_repository(), Repository { name: "copy".into(), files: python_repository().files }];
    let dataset = build(&repositories, Options { language: Language::Python, seed: 7 }).unwrap();
    assert_eq!(dataset.summary.examples, 3);
    assert_eq!(dataset.summary.dropped.duplicate, 3);
    assert_eq!(dataset.summary.repositories, 2);
    assert_eq!(dataset.summary.files, 1);
}

#[test]
fn java_examples() {
    let circle = "package com.acme.shapes;\n\npublic class Circle {\n    public static final double PI = 3.14;\n    public double radius;\n    public double area() { return PI * radius * radius; }\n    public static Circle unit() { return new Circle(); }\n}\n".to_string();
    let app = format!(
        "package com.acme.app;\n\nimport com.acme.shapes.Circle;\nimport java.util.List;\n\npublic class App {{\n    private Circle cached;\n\n    public double run(Circle c) {{\n{}        double a = c.area();\n        Circle u = Circle.unit();\n        double p = Circle.PI * 2;\n        this.cached.radius = 3;\n        List<String> names = List.of(\"x\");\n        names.size();\n        String s = c.describe(\"{{x}}\");\n        return a + u.area();\n    }}\n\n    public int other(String c) {{\n        return c.length();\n    }}\n}}\n",
        filler(Language::Java, 20, "        ")
    );
    let square = format!(
        "package com.acme.shapes;\n\nclass Square {{\n    double side() {{\n{}        return Circle.unit().radius;\n    }}\n}}\n",
        filler(Language::Java, 20, "        ")
    );
    let repositories = [repository(
        "javarepo",
        &[
            ("src/com/acme/shapes/Circle.java", circle),
            ("src/com/acme/app/App.java", app),
            ("src/com/acme/shapes/Square.java", square),
        ],
    )];
    let dataset = build(&repositories, Options { language: Language::Java, seed: 3 }).unwrap();
    check_examples(&dataset, &repositories, Language::Java);
    // `describe` is dropped: its reference holds a `{` in a string, where the scorer would cut it.
    // `c.length()` in `other` is a String parameter: the Circle `c` of `run` is out of scope there.
    assert_eq!(entities_of(&dataset, "src/com/acme/app/App.java"), names(&["area", "unit", "PI", "radius"]));
    assert_eq!(dataset.summary.dropped.no_statement_end, 1);
    // Same package: Circle is visible without an import.
    assert_eq!(entities_of(&dataset, "src/com/acme/shapes/Square.java"), names(&["unit"]));
    assert!(entities_of(&dataset, "src/com/acme/shapes/Circle.java").is_empty(), "a class's own members are not cross-file");
}

#[test]
fn typescript_examples() {
    let shapes = "export class Circle {\n  constructor(public r: number) {}\n  area(): number { return this.r; }\n  static unit(): Circle { return new Circle(1); }\n}\nexport function scale(x: number): number { return x * 2; }\n".to_string();
    let util = "export const LIMIT = 10;\nexport function clamp(x: number) { return Math.min(x, LIMIT); }\n".to_string();
    let app = format!(
        "import {{ Circle, scale }} from './shapes';\nimport * as util from './util';\nimport {{ readFileSync }} from 'fs';\n\n{}\nexport class App {{\n  constructor(private shape: Circle) {{}}\n  run(): number {{\n    const unit = Circle.unit();\n    const size = this.shape.area();\n    const big = scale(size)\n    const capped = util.clamp(big)\n    const text = readFileSync(\"x\");\n    return capped;\n  }}\n}}\n",
        filler(Language::TypeScript, 30, "")
    );
    let repositories =
        [repository("tsrepo", &[("src/shapes.ts", shapes), ("src/util/index.ts", util), ("src/app.ts", app)])];
    let dataset = build(&repositories, Options { language: Language::TypeScript, seed: 5 }).unwrap();
    check_examples(&dataset, &repositories, Language::TypeScript);
    assert_eq!(entities_of(&dataset, "src/app.ts"), names(&["unit", "area", "scale", "clamp"]));
    // A semicolon-free line ends the reference at the line end.
    let clamp = dataset.examples.iter().find(|e| e.entity == "clamp").unwrap();
    assert!(clamp.groundtruth.ends_with("clamp(big)"), "{clamp:?}");
}

#[test]
fn csharp_examples() {
    let circle = "namespace Acme.Shapes\n{\n    public class Circle\n    {\n        public const double Pi = 3.14;\n        public double Radius { get; set; }\n        public double Area() { return Pi * Radius * Radius; }\n        public static Circle Unit() { return new Circle(); }\n    }\n}\n".to_string();
    let program = format!(
        "using System;\nusing Acme.Shapes;\n\nnamespace Acme.App\n{{\n    public class Program\n    {{\n        private Circle cached;\n\n        public double Run(Circle c)\n        {{\n{}            var made = new Circle();\n            double a = c.Area();\n            double b = Circle.Unit().Area();\n            made.Radius = 2;\n            this.cached.Radius = 1;\n            Console.WriteLine(a);\n            return a + b + Circle.Pi;\n        }}\n    }}\n}}\n",
        filler(Language::CSharp, 5, "            ")
    );
    let repositories = [repository("csrepo", &[("Shapes/Circle.cs", circle), ("App/Program.cs", program)])];
    let dataset = build(&repositories, Options { language: Language::CSharp, seed: 9 }).unwrap();
    check_examples(&dataset, &repositories, Language::CSharp);
    assert_eq!(entities_of(&dataset, "App/Program.cs"), names(&["Area", "Unit", "Radius", "Pi"]));
    let radius = dataset.examples.iter().find(|e| e.entity == "Radius").unwrap();
    assert!(radius.groundtruth.ends_with("made.Radius = 2;") || radius.groundtruth.ends_with("Radius = 2;"), "{radius:?}");
}
