//! `kstretch`: the admin command line for kstretch central.

mod agents;
mod central;
mod error;
mod forget;
mod kubeconfig;
mod moves;
mod operations;
mod status;
mod terminal;
mod unclaimed;

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

/// Admin client for kstretch central.
#[derive(Parser, Debug)]
#[command(name = "kstretch", version, about, long_about)]
struct Cli {
    /// gRPC address of central's admin API.
    #[arg(
        long,
        env = "KSTRETCH_CENTRAL",
        default_value = "http://127.0.0.1:9090",
        global = true
    )]
    central: String,

    /// Deadline of each call to central, in seconds.
    #[arg(long, default_value_t = 10, global = true)]
    timeout: u64,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Shows central's version, its Kubernetes cluster and the resources it manages.
    Status,
    /// Shows the agents of the member clusters (connected or not), what each applied and
    /// reports, and the desired state central holds per cluster.
    Agents,
    /// Removes the objects a member cluster's agent keeps for an owner that central neither
    /// reconciles nor declared deleted (listed as unclaimed by `kstretch agents`), with your
    /// own credentials for that cluster. Lists them without --yes.
    RemoveUnclaimed(unclaimed::Args),
    /// Moves every partition replica and all leadership off the brokers of a member cluster,
    /// for maintenance (the pods keep running), under a replication throttle. With --dry-run,
    /// shows what would move. With --move-nodes-to, moves the cluster's node pools out instead.
    Drain(operations::DrainArgs),
    /// Puts the partitions the last completed drain of a member cluster moved back where they
    /// were, leaders included.
    Undrain(operations::UndrainArgs),
    /// Gives every partition replicas in as many member clusters as its replication factor
    /// allows (a partition whose replicas all sit in one cluster is lost with it), under a
    /// replication throttle; leaders stay. With --dry-run, shows what would move.
    Spread(operations::SpreadArgs),
    /// Moves a KafkaNodePool to another member cluster: new nodes start there, central drains
    /// the old brokers and moves the quorum's voters, then the old nodes stop. With --wait,
    /// follows it to the end.
    MovePool(moves::MoveArgs),
    /// Forgets a member cluster that is lost for good: its nodes are taken out of the Kafka,
    /// their partitions get replicas on the survivors, and its voters leave the quorum.
    Forget(forget::ForgetArgs),
    /// Rebuilds a controller quorum whose majority was lost for good with forgotten clusters,
    /// from one surviving controller, which becomes the only voter; what only the lost voters
    /// had written is lost, and partitions left without a leader get an unclean election.
    RecoverQuorum(operations::RecoverArgs),
    /// Lists the operations (drains, undrains, spreads) and where each stands.
    Operations(operations::ListArgs),
    /// Stops an operation at a consistent point: reassignments in flight are cancelled.
    Abort(operations::AbortArgs),
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let timeout = Duration::from_secs(cli.timeout);
    let result = match cli.command {
        Command::Status => status::run(&cli.central, timeout).await,
        Command::Agents => agents::run(&cli.central, timeout).await,
        Command::RemoveUnclaimed(args) => unclaimed::run(&cli.central, timeout, &args).await,
        Command::Drain(args) => operations::drain(&args).await,
        Command::Undrain(args) => operations::undrain(&args).await,
        Command::Spread(args) => operations::spread(&args).await,
        Command::MovePool(args) => moves::run(&args).await,
        Command::Forget(args) => forget::run(&cli.central, timeout, &args).await,
        Command::RecoverQuorum(args) => operations::recover_quorum(&args).await,
        Command::Operations(args) => operations::list(&args).await,
        Command::Abort(args) => operations::abort(&args).await,
    };
    match result {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}
