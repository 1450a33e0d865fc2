% MARKOV30  Distribution of a Markov chain after 30 steps (thin iterate).
function p = markov30(P, p0)
  %#linview dims P(n,n) p0(n,1)
  %#linview dynamic P
  p = p0;
  for i = 1:30
    p = P' * p;
  end
end
