using System;
using System.Threading;
using System.Threading.Tasks;

namespace Live.App
{
    // LiveApp [SECONDS] [--mint]: runs its workloads for SECONDS (default:
    // until killed), printing "ready PID" once started.  With --mint it also
    // makes new methods every second (DynamicMethod, compiled Regex,
    // expression trees) and drops them, so the runtime unloads them.
    public static class Program
    {
        public static volatile bool Stop;

        public static int Main(string[] args)
        {
            double seconds = args.Length > 0 ? double.Parse(args[0], System.Globalization.CultureInfo.InvariantCulture) : 0;
            bool mint = Array.IndexOf(args, "--mint") >= 0;
            var threads = new[]
            {
                new Thread(Workers.Compute) { Name = "compute", IsBackground = true },
                new Thread(Workers.Waiter) { Name = "waiter", IsBackground = true },
            };
            foreach (var t in threads)
                t.Start();
            var asyncLoop = Task.Run(() => Workers.AsyncLoop());
            Thread minter = null;
            if (mint)
            {
                minter = new Thread(Minting.Minter.Run) { Name = "minter", IsBackground = true };
                minter.Start();
            }
            Console.WriteLine("ready " + Environment.ProcessId);
            Console.Out.Flush();
            if (seconds > 0)
                Thread.Sleep(TimeSpan.FromSeconds(seconds));
            else
                Thread.Sleep(Timeout.Infinite);
            Stop = true;
            return 0;
        }
    }
}
