% MARKOV  Distribution of a Markov chain after eight steps.
%   P is row-stochastic (P(i,j) = probability of moving from state i to j)
%   and p0 the initial distribution (a column), so p = (P^8)' * p0.

function p = markov(P, p0)
  %#linview dims P(n,n) p0(n,1)
  %#linview dynamic P
  p = (P^8)' * p0;
end
