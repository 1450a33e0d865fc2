function p = markov_steps(P, p0)
  % distribution of a Markov chain after 8 steps (P column-stochastic)
  % test inputs: P=stoch(6) p0=dist(6)
  p = p0;
  for i = 1:8
    p = P * p;
  end
end
