# bench/policies.sh: minimum capacity to finish over the lower bound (peak live bytes in 2 MiB
# pages), per trace and policy; the offline planner's peak beside them. 1.0 is the bound.
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set key outside right top noenhanced
set xtics rotate by -35 noenhanced
set ylabel "minimum capacity / lower bound"
set yrange [0.95:*]
set grid ytics
set datafile missing "NaN"
# more bars than gnuplot's 8 default colours: the offline planner grey, then distinct ones
set linetype 1 lc rgb "#7f7f7f"
set linetype 9 lc rgb "#8c564b"
set linetype 10 lc rgb "#17becf"
set linetype 11 lc rgb "#bcbd22"
set linetype 12 lc rgb "#e377c2"
set terminal pngcairo size 1400,560 font ",10"
set output "policies-mincap.png"
plot for [i=2:15] "policies-mincap.dat" using i:xtic(1) title columnheader(i)
set terminal svg size 1400,560 font ",10"
set output "policies-mincap.svg"
replot
