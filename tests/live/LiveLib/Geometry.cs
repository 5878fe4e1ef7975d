using System;
using System.Collections.Generic;

namespace Live.Lib.Geometry
{
    public readonly struct Vec
    {
        public readonly double X, Y;
        public Vec(double x, double y) { X = x; Y = y; }
        public double Dot(Vec o) => X * o.X + Y * o.Y;
    }

    // A generic type with a value-type instantiation (its own code) and a
    // reference-type one (shared __Canon code).
    public sealed class Accumulator<T>
    {
        private readonly List<T> _items = new List<T>();
        private readonly Func<T, double> _weight;

        public Accumulator(Func<T, double> weight) { _weight = weight; }

        public void Add(T item) => _items.Add(item);

        public double Sum()
        {
            double s = 0;
            for (int i = 0; i < _items.Count; i++)
                s += Heavy(_weight(_items[i]));
            return s;
        }

        private static double Heavy(double x)
        {
            double r = x;
            for (int k = 0; k < 200; k++)
                r = Math.Sqrt(r * r + k);
            return r;
        }
    }

    public static class Shapes
    {
        public static double Spin(int rounds)
        {
            var acc = new Accumulator<Vec>(v => v.Dot(v));
            for (int i = 0; i < rounds; i++)
                acc.Add(new Vec(i, i + 1));
            var names = new Accumulator<string>(s => s.Length);
            for (int i = 0; i < rounds; i++)
                names.Add("shape" + i);
            return acc.Sum() + names.Sum();
        }
    }
}
