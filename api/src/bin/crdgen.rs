//! `crdgen`: writes the CRD YAML of every kind into the `kstretch-crds` chart
//! (`charts/kstretch-crds/templates/<plural>.<group>.yaml`), or into the directory given as the
//! only argument. The output is deterministic; a unit test fails when the committed files differ.

use std::path::PathBuf;
use std::process::ExitCode;

use kstretch_api::crd_yaml::{chart_templates_dir, write_all};

fn main() -> ExitCode {
    let dir = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(chart_templates_dir);
    match write_all(&dir) {
        Ok(paths) => {
            for path in paths {
                println!("wrote {}", path.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("crdgen: {e}");
            ExitCode::FAILURE
        }
    }
}
