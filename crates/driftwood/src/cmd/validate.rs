//! `driftwood validate -f PATH...`: check manifests offline and report per object.

use anyhow::Context;
use driftwood_api::manifest::{Document, parse_documents};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// A manifest file, a folder of .yaml/.yml/.json files, or `-` for standard input.
    /// Repeat to read several.
    #[arg(short = 'f', long = "filename", value_name = "PATH", required = true)]
    files: Vec<String>,
    /// Descend into sub-folders of folders given with -f.
    #[arg(short = 'R', long)]
    recursive: bool,
}

pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let mut sources = Vec::new();
    for file in &args.files {
        if file == "-" {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .context("reading standard input")?;
            sources.push(("<stdin>".to_string(), text));
        } else {
            collect(Path::new(file), args.recursive, true, &mut sources)?;
        }
    }
    let mut invalid = 0usize;
    let mut checked = 0usize;
    for (source, text) in &sources {
        for document in parse_documents(text) {
            match document {
                Err(e) => {
                    invalid += 1;
                    println!("{source}: invalid\n  error: {e}");
                }
                Ok(Document::Other {
                    api_version,
                    kind,
                    name,
                    ..
                }) => {
                    println!(
                        "{kind} {name:?} ({source}): skipped ({api_version} {kind} is not a driftwood kind)"
                    );
                }
                Ok(Document::Karpenter(object)) => {
                    checked += 1;
                    let report = object.validate();
                    if report.is_valid() {
                        println!("{} ({source}): ok", report.object);
                    } else {
                        invalid += 1;
                        println!("{} ({source}): invalid", report.object);
                    }
                    for error in &report.errors {
                        println!("  error: {error}");
                    }
                    for warning in &report.warnings {
                        println!("  warning: {warning}");
                    }
                }
            }
        }
    }
    println!("{checked} object(s) checked, {invalid} invalid");
    Ok(if invalid == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn collect(
    path: &Path,
    recursive: bool,
    top: bool,
    out: &mut Vec<(String, String)>,
) -> anyhow::Result<()> {
    if path.is_dir() {
        if !top && !recursive {
            return Ok(());
        }
        let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
            .with_context(|| format!("reading folder {}", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        entries.sort();
        for entry in entries {
            let is_manifest = entry
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"));
            if entry.is_dir() || is_manifest {
                collect(&entry, recursive, false, out)?;
            }
        }
        return Ok(());
    }
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    out.push((path.display().to_string(), text));
    Ok(())
}
