// The sample app of docker/compose.yaml (see SampleApp.csproj). One thread
// prices orders without a pause (CPU), another takes orders from a queue the
// first fills (mostly waiting); both run until the process is stopped.
using System;
using System.Collections.Concurrent;
using System.Runtime.CompilerServices;
using System.Threading;

namespace Shop
{
    public static class PriceCalculator
    {
        // a frame of its own in every profile (else inlined into its caller)
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static double Total(int items, int seed)
        {
            double sum = 0;
            for (int i = 1; i <= items; i++)
                sum += UnitPrice(i, seed) * Discount(i);
            return sum;
        }

        static double UnitPrice(int item, int seed)
        {
            double p = (item * 31 + seed) % 97;
            return Math.Sqrt(p * p + 1.0);
        }

        static double Discount(int item)
        {
            return item % 10 == 0 ? 0.9 : 1.0;
        }
    }

    public static class Program
    {
        static readonly BlockingCollection<double> Orders = new BlockingCollection<double>(64);

        static void PriceOrders()
        {
            for (int seed = 0; ; seed++)
            {
                double t = PriceCalculator.Total(20000, seed);
                if (seed % 50 == 0)
                    Orders.TryAdd(t);
            }
        }

        static void ShipOrders()
        {
            long shipped = 0;
            foreach (double _ in Orders.GetConsumingEnumerable())
            {
                shipped++;
                Thread.Sleep(20);
            }
            Console.WriteLine("shipped " + shipped);
        }

        public static void Main()
        {
            Console.WriteLine("sample app: pid " + Environment.ProcessId);
            var shipper = new Thread(ShipOrders) { Name = "shipper", IsBackground = true };
            shipper.Start();
            PriceOrders();
        }
    }
}
